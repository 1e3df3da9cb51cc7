"""The storage engine: log format, segments, log dirs, replica moves, recovery, disk failure."""
