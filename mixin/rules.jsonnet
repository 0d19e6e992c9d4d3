// The rules file alerts/patroni-raft.rules.yml, rendered with the defaults, or with overrides:
//
//   jsonnet -S mixin/rules.jsonnet > alerts/patroni-raft.rules.yml
//   jsonnet -S --tla-code 'config={jobSelector: "job=\"pg-ha\""}' mixin/rules.jsonnet > patroni.rules.yml
function(config={})
  local m = (import 'mixin.libsonnet') + { _config+:: config };
  (import 'lib/rules.libsonnet').yaml(m.patroniRaftRuleGroups, m._config, m.patroniRaftRulesHeader)
