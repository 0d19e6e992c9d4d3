// patroni-raft-exporter monitoring mixin: alert rules and dashboards for PostgreSQL clusters
// run by Patroni on its Raft DCS, with the deployment choices in _config (config.libsonnet).
//
//   jsonnet -e '(import "mixin/mixin.libsonnet").prometheusAlerts'      the rules as JSON
//   jsonnet -S mixin/rules.jsonnet                                       the rules file (YAML)
//   jsonnet -e '(import "mixin/mixin.libsonnet").grafanaDashboards'     the dashboards
(import 'config.libsonnet')
+ (import 'alerts.libsonnet')
+ (import 'dashboards.libsonnet')
