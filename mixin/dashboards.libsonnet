// The dashboards of the mixin: the JSON that scripts/gen-dashboards.sh generates from
// dashboards/src (Grafana's typed builder; CI fails when they are out of date). They select
// the cluster by the `scope` label and the Prometheus data source by the variable `datasource`.
{
  grafanaDashboards+:: {
    'patroni-cluster.json': import '../dashboards/patroni-cluster.json',
    'patroni-raft.json': import '../dashboards/patroni-raft.json',
    'patroni-fleet.json': import '../dashboards/patroni-fleet.json',
  },
}
