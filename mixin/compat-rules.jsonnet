// The recording rules file alerts/patroni-compat.rules.yml (Patroni's own /metrics names):
//
//   jsonnet -S mixin/compat-rules.jsonnet > alerts/patroni-compat.rules.yml
local m = import 'mixin.libsonnet';
(import 'lib/rules.libsonnet').recordsYaml(m.patroniCompatRuleGroups, m.patroniCompatRulesHeader)
