"""The broker: Kafka wire protocol, handlers, replication, the trio server, the admin client."""
