"""Multi-broker scenarios on real brokers and a real ZooKeeper."""
