// The deployment choices of the patroni-raft-exporter mixin. Override any of them:
//
//   (import 'mixin/mixin.libsonnet') + { _config+:: { jobSelector: 'job="pg-ha"' } }
//
// or render the rules file with them (README, "Alert rules for another job name"):
//
//   jsonnet -S --tla-code 'config={jobSelector: "job=\"pg-ha\""}' mixin/rules.jsonnet
{
  _config+:: {
    // The scrape jobs of the exporter: PatroniExporterDown watches `up{<jobSelector>}`.
    // In COS the jobs are named juju_<model>_..._<app>_...: use e.g. 'juju_application="patroni-exporter"'.
    jobSelector: 'job=~".*patroni.*"',

    // The labels that tell exporters watching the same cluster apart. The rules that take the
    // best view of every exporter (max without (...)) aggregate them away, so that one exporter
    // that cannot see a voter does not speak for the others. Add e.g. juju_unit when your
    // exporters differ by it.
    aggregationLabels: 'instance, job',

    // The label that names a Patroni cluster (the exporter's `scope`). If your Prometheus
    // relabels it, name the new label here: the alert texts follow (`$labels.scope` and the
    // `{scope=%q}` of their queries); the dashboards keep `scope` (dashboards.libsonnet).
    clusterLabel: 'scope',

    // runbook_url of every alert: the alert name lowercased, a section of docs/runbooks.md.
    // The default is where the Debian package installs it: the project has no public home
    // to link to. Point it at your own copy (a wiki, a Git forge), e.g.
    // 'https://git.example.com/ops/patroni-raft-exporter/blob/main/docs/runbooks.md#%s'.
    runbookURLPattern: 'file:///usr/share/doc/patroni-raft-exporter/docs/runbooks.md#%s',

    // The `for:` of every alert that has one. Why each value: the comment next to the rule in
    // mixin/alerts.libsonnet, the file header there, and the alert's section of docs/runbooks.md.
    // Alerts absent here (PatroniRaftFrequentLeaderChanges, PatroniRaftApplyBacklog,
    // PatroniFrequentLeaderChanges, PatroniPostgresRestarted, PatroniLeaderChanged) carry
    // their window in the expression. The descriptions that say "for <duration>" follow.
    forDurations: {
      PatroniRaftQuorumLost: '1m',
      PatroniRaftQuorumNotVisible: '2m',
      PatroniRaftPasswordRejected: '1m',
      PatroniRaftNoLeader: '1m',
      PatroniRaftSplitLeadership: '2m',
      PatroniRaftNodeUnreachable: '2m',
      PatroniRaftNodeWithoutQuorum: '2m',
      PatroniRaftPartnerDisconnected: '5m',
      PatroniRaftZombieVoter: '30m',
      PatroniClusterUnreachable: '1m',
      PatroniNoLeader: '1m',
      PatroniMultipleLeaders: '30s',
      PatroniMemberNotRunning: '2m',
      PatroniMemberApiUnreachable: '2m',
      PatroniRoleMismatch: '1m',
      PatroniReplicationLagHigh: '5m',
      PatroniTimelineDiverged: '3m',
      PatroniSyncStandbyMissing: '2m',
      PatroniNoFailoverCandidate: '5m',
      PatroniFailsafeModeActive: '1m',
      PatroniSyncStateMismatch: '2m',
      PatroniWalReplayPaused: '15m',
      PatroniWatchdogFailed: '5m',
      PatroniPaused: '1h',
      PatroniPendingRestart: '30m',
      PatroniExporterDown: '5m',
      PatroniExporterPollStale: '1m',
      PatroniExporterPollErrors: '15m',
      PatroniExporterConfigReloadFailed: '1m',
      PatroniRaftQuorumNoMargin: '5m',
      PatroniFailoverDataAtRisk: '5m',
      PatroniReplicationLagTime: '2m',
      PatroniHaLoopStalled: '1m',
      PatroniLeaderClockSkew: '2m',
      PatroniMemberRestSlow: '5m',
      PatroniMultiplePrimaries: '0s',
      PatroniDcsViewsDiverge: '30s',
      PatroniRaftVoterSetsDiffer: '1m',
      PatroniStandbyLeaderNotStreaming: '1m',
      PatroniStandbyLagHigh: '5m',
      PatroniEtcdQuorumLost: '1m',
      PatroniEtcdQuorumNotVisible: '2m',
      PatroniEtcdQuorumNoMargin: '5m',
      PatroniEtcdAlarm: '0s',
      PatroniEtcdFactUnreadable: '10m',
      PatroniMemberDcsViewStale: '1m',
    },
  },
}
