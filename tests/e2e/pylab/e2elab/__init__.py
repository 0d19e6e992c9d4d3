"""The typed end-to-end lab: real Patroni clusters (tests/e2e/cluster.sh), real etcd, the exporter,
Prometheus and Alertmanager, each test in a network namespace of its own.

The bash e2e (tests/e2e/*.sh) does not grow; new scenarios are written here. Every piece is a
thin, typed wrapper over the real thing: `PatroniCluster` calls cluster.sh (one harness, not
two), `Scrape` parses /metrics with prometheus_client's own exposition parser, and ground truth
(`etcdctl endpoint status`, a member's own GET /patroni, PostgreSQL's LSNs) is read with the time
it was read, so a reading is judged against what was true around it, not against a guess.
"""
