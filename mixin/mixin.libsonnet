// patroni-raft-exporter monitoring mixin: alert rules and dashboards for PostgreSQL clusters
// run by Patroni on its Raft DCS, with the deployment choices in _config (config.libsonnet).
//
//   jsonnet -e '(import "mixin/mixin.libsonnet").prometheusAlerts'      the rules as JSON
//   jsonnet -S mixin/rules.jsonnet                                       the rules file (YAML)
//   jsonnet -e '(import "mixin/mixin.libsonnet").grafanaDashboards'     the dashboards
//   jsonnet -e '(import "mixin/mixin.libsonnet").prometheusRules'       Patroni's own /metrics
//                                                                        names (recording rules)
(import 'config.libsonnet')
+ (import 'alerts.libsonnet')
+ (import 'dashboards.libsonnet')
+ (import 'compat.libsonnet')
+ {
  prometheusRules+:: {
    groups+: (import 'lib/rules.libsonnet').records($.patroniCompatRuleGroups).groups,
  },
}
