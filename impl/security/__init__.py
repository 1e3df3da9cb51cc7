"""Security: the ACL authorizer (a sans-IO decision core) and its ZooKeeper storage format.

Public surface:

- :mod:`impl.security.authorizer` — Kafka's ``AclAuthorizer`` decision as a pure function over
  a binding set (deny wins over allow, ``super.users``, ``allow.everyone.if.no.acl.found``,
  literal/prefixed/wildcard patterns, the wildcard principal ``User:*``, host matching and the
  implied operations), the ACL filters of DescribeAcls/DeleteAcls, and the ZooKeeper layout and
  JSON of ``/kafka-acl``, ``/kafka-acl-extended`` and their change notifications.
"""
