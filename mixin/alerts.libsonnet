// The alert rules of patroni-raft-exporter, the source of alerts/patroni-raft.rules.yml
// (scripts/render-mixin.sh renders it with the defaults of config.libsonnet; CI fails when
// the shipped file differs). How a source reads: lib/rules.libsonnet. Every justification of
// a `for` or a threshold is the `comment` next to its rule (rendered as a YAML comment) and
// the alert's section of docs/runbooks.md.
local rules = import 'lib/rules.libsonnet';

// A template of the quorum-lost description: `series` (a selector with {scope=%q}) of the
// first exporter, by instance, whose own verdict is lost (0), rendered by `render`. With
// exporters in several failure domains the evidence and the counts must come from one that
// sees the loss, not from one that cannot tell.
local fromLosingExporterOf(verdict, series, render='value') =
  '{{ with printf "%s and on(${aggregationLabels}) %s == 0" $labels.scope $labels.scope | query }}{{ . | sortByLabel "instance" | first | %s }}{{ else }}?{{ end }}' % [series, verdict, render];
local fromLosingExporter(series, render='value') =
  fromLosingExporterOf('patroni_raft_cluster_quorum{scope=%q}', series, render);
// The same, from the first exporter whose own etcd verdict is lost.
local fromLosingEtcdExporter(series, render='value') =
  fromLosingExporterOf('patroni_dcs_quorum{scope=%q,dcs=\\"etcd\\"}', series, render);
// The failsafe clause of a quorum-lost text: `active` while a member reports failsafe mode
// active, `inactive` otherwise.
local ifFailsafe(active, inactive) =
  '{{ with printf "max(patroni_member_failsafe_active{scope=%%q}) == 1" $labels.scope | query }}%s{{ else }}%s{{ end }}' % [active, inactive];

{
  // The header of the rendered rules file.
  patroniRaftRulesHeader:: |||
    Prometheus alert rules for patroni-raft-exporter.

    Conventions (see docs/runbooks.md for the reasoning behind every threshold and `for`):
    * every alert has `severity` (critical = page, warning = ticket/chat, info = FYI),
      a one-line `summary`, a `description` with the labels and the value, and a
      `runbook_url` pointing at the section of docs/runbooks.md named like the alert;
    * vector matching uses `ignoring(...)` / aggregation uses `without(...)` so that
      target labels added by the scrape (job, instance, juju_model, juju_application,
      ...) survive into the alert: two clusters with the same `scope` in two Juju
      models stay apart;
    * the exporter polls every ~5 s, Prometheus scrapes every ~15 s; every `for` is
      longer than the transients of a switchover or an automatic failover measured on
      a real 3-member cluster (stopped member, timeline disagreement, missing sync
      standby: all under ~45 s).

    Generated from mixin/ (mixin/alerts.libsonnet with the defaults of mixin/config.libsonnet)
    by scripts/render-mixin.sh: edit the mixin, not this file. The `for:` of each alert is
    _config.forDurations, the job selector of PatroniExporterDown _config.jobSelector, the
    labels aggregated away by `without (...)` _config.aggregationLabels.
  |||,

  // The rule groups as written (placeholders: lib/rules.libsonnet).
  patroniRaftRuleGroups:: [
    {
      name: 'patroni-raft.raft',
      rules: [
        {
          alert: 'PatroniRaftQuorumLost',
          comment:: |||
            The best verdict of every exporter watching the scope (1 confirmed > 0 lost > -1 not
            visible): with exporters in several failure domains, this pages only when none of
            them confirms the quorum and at least one has evidence of the loss. Aggregate over
            the labels that tell your exporters apart (_config.aggregationLabels: instance, job,
            and e.g. juju_unit).
          |||,
          expr: 'max without (${aggregationLabels}) (patroni_raft_cluster_quorum) == 0',
          labels: { severity: 'critical' },
          annotations: {
            summary: 'Raft DCS of Patroni cluster {{ $labels.scope }} lost its quorum: {{ with printf "max(patroni_member_failsafe_active{scope=%q}) == 1" $labels.scope | query }}failsafe mode keeps the primary, one more failure demotes it.{{ else }}the primary demotes itself, writes stop.{{ end }}',
            description: |||
              No exporter confirms a Raft quorum for scope {{ $labels.scope }} (best verdict
              {{ $value }}), and the evidence says it is lost (%(evidence)s):
              %(answering)s
              of %(voters)s voters answer,
              %(withQuorum)s report has_quorum,
              %(refused)s refuse connections.
              {{ with printf "max(patroni_member_failsafe_active{scope=%%q}) == 1" $labels.scope | query }}Failsafe mode is active: the primary keeps running without the DCS while every member answers it over REST; losing one more member demotes it.{{ else }}Without quorum Patroni cannot write to the DCS: the leader demotes itself after ~retry_timeout
              (≈14 s), /cluster keeps answering 200 with a frozen view and patronictl may hang.{{ end }}
            ||| % {
              evidence: fromLosingExporter('patroni_raft_quorum_evidence{scope=%q} == 1', 'label "evidence"'),
              answering: fromLosingExporter('patroni_raft_voters_answering{scope=%q}'),
              voters: fromLosingExporter('patroni_raft_voters{scope=%q}'),
              withQuorum: fromLosingExporter('patroni_raft_voters_with_quorum{scope=%q}'),
              refused: fromLosingExporter('patroni_raft_voters_unanswered{scope=%q,reason=\\"refused\\"}'),
            },
          },
        },
        {
          alert: 'PatroniRaftQuorumNotVisible',
          expr: 'max without (${aggregationLabels}) (patroni_raft_cluster_quorum) == -1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'The exporter cannot tell whether Raft of Patroni cluster {{ $labels.scope }} has a quorum.',
            description: |||
              For ${for} no exporter could confirm or refute the Raft quorum of scope {{ $labels.scope }}
              (best verdict {{ $value }}):
              {{ with printf "patroni_raft_voters_answering{scope=%q}" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }}
              of {{ with printf "patroni_raft_voters{scope=%q}" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }} voters answer;
              {{ with printf "patroni_raft_voters_unanswered{scope=%q,reason=\"timeout\"}" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }} time out,
              {{ with printf "patroni_raft_voters_unanswered{scope=%q,reason=\"auth\"}" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }} refuse the password,
              {{ with printf "patroni_raft_voters_unanswered{scope=%q,reason=\"error\"}" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }} fail otherwise.
              This is the exporter's blindness, not evidence of a loss: check the network between the
              exporter and the members, the exporter's Raft password, and whether the cluster is up.
            |||,
          },
        },
        {
          alert: 'PatroniRaftPasswordRejected',
          expr: 'patroni_raft_voters_unanswered{reason="auth"} > 0',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft nodes of Patroni cluster {{ $labels.scope }} refuse the exporter\'s Raft password.',
            description: |||
              {{ $value }} Raft voter(s) of scope {{ $labels.scope }} closed the connection on the
              exporter's first frame for ${for}: the password the exporter uses (--raft.password-file,
              raft_password_file, or raft.password of Patroni's YAML) is not the cluster's. The
              exporter cannot see those voters' Raft state; the quorum verdict ignores them.
            |||,
          },
        },
        {
          alert: 'PatroniRaftNoLeader',
          comment:: |||
            Only when every voter answers: a leader the exporter cannot reach is not "no leader".
          |||,
          expr: |||
            patroni_raft_cluster_leaders == 0
            and patroni_raft_cluster_quorum == 1
            and patroni_raft_voters_answering >= patroni_raft_voters
          |||,
          labels: { severity: 'critical' },
          annotations: {
            summary: 'Raft DCS of Patroni cluster {{ $labels.scope }} has a quorum but no Raft leader.',
            description: |||
              No Raft node of scope {{ $labels.scope }} has claimed leadership for ${for} although every
              voter answers and a quorum of them is connected (Raft leaders = {{ $value }}). Patroni
              cannot write to the DCS without a Raft leader: the primary demotes itself.
            |||,
          },
        },
        {
          alert: 'PatroniRaftSplitLeadership',
          expr: 'patroni_raft_cluster_leaders > 1',
          labels: { severity: 'critical' },
          annotations: {
            summary: '{{ $value }} Raft nodes of Patroni cluster {{ $labels.scope }} claim Raft leadership.',
            description: |||
              {{ $value }} Raft nodes of scope {{ $labels.scope }} have claimed to be the Raft leader
              for ${for}. A partitioned old leader may keep claiming leadership for up to its
              leader_fallback_timeout ({{ with printf "max(patroni_member_raft_timing_seconds{scope=%q,setting=\"leader_fallback_timeout\"})" $labels.scope | query }}{{ . | first | value }} s in force{{ else }}pysyncobj's default 30 s{{ end }});
              longer than that means the nodes see different clusters (partition, mismatched
              partner lists, or two Raft clusters sharing addresses).
            |||,
          },
        },
        {
          alert: 'PatroniRaftNodeUnreachable',
          expr: 'patroni_raft_up == 0',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft node {{ $labels.node }} of Patroni cluster {{ $labels.scope }} does not answer.',
            description: |||
              The exporter has not been able to read the Raft status of node {{ $labels.node }}
              (scope {{ $labels.scope }}) for ${for} (patroni_raft_up = {{ $value }}). This is what the
              exporter sees, not necessarily what the cluster sees: the Raft node runs inside
              Patroni, so Patroni on that member is down, the host or the path from the exporter is
              unreachable, or the exporter's Raft password is wrong (patroni_raft_voters_unanswered
              tells which; the quorum verdict is patroni_raft_cluster_quorum).
            |||,
          },
        },
        {
          alert: 'PatroniRaftNodeWithoutQuorum',
          expr: |||
            patroni_raft_has_quorum == 0
            and patroni_raft_up == 1
            and ignoring(node) patroni_raft_cluster_quorum == 1
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft node {{ $labels.node }} of Patroni cluster {{ $labels.scope }} is cut off from the quorum.',
            description: |||
              Raft node {{ $labels.node }} (scope {{ $labels.scope }}) answers but has reported
              has_quorum = {{ $value }} for ${for} while the rest of the cluster has a quorum: it cannot
              reach enough partners. Patroni on that member cannot write to the DCS.
            |||,
          },
        },
        {
          alert: 'PatroniRaftPartnerDisconnected',
          expr: |||
            patroni_raft_partner_connected == 0
            unless ignoring(node)
              label_replace(patroni_raft_up == 0, "partner", "$1", "node", "(.*)")
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft node {{ $labels.node }} is not connected to its partner {{ $labels.partner }} (cluster {{ $labels.scope }}).',
            description: |||
              Raft node {{ $labels.node }} (scope {{ $labels.scope }}) has reported partner
              {{ $labels.partner }} as not connected (status {{ $value }}) for ${for}, although the exporter
              can reach {{ $labels.partner }} itself. One more lost link may cost the quorum.
            |||,
          },
        },
        {
          alert: 'PatroniRaftFrequentLeaderChanges',
          comment:: |||
            Rounded: increase() extrapolates to the edges of its window, so 3 changes read 3.0x
            when the evaluation falls between two scrapes, and "more than 3" fired on 3 (seen
            with 3 restarts of pysyncobj 0.3.17 nodes, tests/e2e/restart.sh; alerts/tests/restart.test.yml).
            From 0.3.16 on a restarted node keeps its term and often forces an election before
            it hears the leader, so a rolling restart of three units costs up to three changes.
          |||,
          expr: 'round(increase(patroni_raft_leader_changes_total[1h])) > 3',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft leadership of Patroni cluster {{ $labels.scope }} changed {{ $value | humanize }} times in 1h.',
            description: |||
              The exporter saw {{ $value | humanize }} Raft leader changes in scope {{ $labels.scope }}
              within the last hour (more than 3). Flapping Raft leadership makes DCS writes time out.
            |||,
          },
        },
        {
          alert: 'PatroniRaftZombieVoter',
          comment:: |||
            More Raft voters than Patroni members and witnesses for long: a member was removed
            without `syncobj_admin -remove`, and its dead voter counts towards the majority. A
            witness (stereo mode's watcher, patroni_raft_witnesses) is a voter by design.
          |||,
          expr: |||
            max without (${aggregationLabels}) (patroni_raft_voters)
              - max without (${aggregationLabels}) (patroni_raft_witnesses)
            > max without (${aggregationLabels}) (patroni_cluster_members)
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft of Patroni cluster {{ $labels.scope }} has more voters than members.',
            description: |||
              Scope {{ $labels.scope }} has had {{ $value }} Raft voters besides its witnesses for ${for}, more than the members in
              GET /cluster ({{ with printf "max(patroni_cluster_members{scope=%q})" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }}).
              A voter that no member runs still counts towards the majority: the cluster tolerates one failure fewer.
            |||,
          },
        },
        {
          alert: 'PatroniRaftApplyBacklog',
          comment:: |||
            A node whose last applied index stays behind its commit index for 10 minutes,
            without the gap shrinking, is not applying the DCS log (stuck or overloaded).
          |||,
          expr: |||
            (patroni_raft_commit_index - patroni_raft_last_applied_index) > 0
            and min_over_time((patroni_raft_commit_index - patroni_raft_last_applied_index)[10m:1m]) > 0
            and (patroni_raft_commit_index - patroni_raft_last_applied_index)
              >= (patroni_raft_commit_index offset 10m - patroni_raft_last_applied_index offset 10m)
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft node {{ $labels.node }} (cluster {{ $labels.scope }}) does not apply its committed log.',
            description: |||
              Node {{ $labels.node }} of scope {{ $labels.scope }} has been {{ $value }} entries behind its commit
              index for 10m and the gap did not shrink: its Patroni reads an old DCS state.
            |||,
          },
        },
      ],
    },
    {
      name: 'patroni-raft.patroni',
      rules: [
        {
          alert: 'PatroniClusterUnreachable',
          expr: 'patroni_up == 0',
          labels: { severity: 'critical' },
          annotations: {
            summary: 'No member of Patroni cluster {{ $labels.scope }} answers GET /cluster.',
            description: |||
              The exporter has not received an answer to GET /cluster from any member of scope
              {{ $labels.scope }} for ${for} (patroni_up = {{ $value }}). Either every member is down
              or the exporter cannot reach them (network, TLS, address).
            |||,
          },
        },
        {
          alert: 'PatroniNoLeader',
          expr: 'patroni_cluster_leaders == 0 and patroni_up == 1',
          labels: { severity: 'critical' },
          annotations: {
            summary: 'Patroni cluster {{ $labels.scope }} has no leader.',
            description: |||
              GET /cluster of scope {{ $labels.scope }} has listed no member with role leader or
              standby_leader for ${for} (leaders = {{ $value }}). An automatic failover elects a new leader
              in ~25 s; one minute without a leader means failover is not happening.
            |||,
          },
        },
        {
          alert: 'PatroniMultipleLeaders',
          comment:: |||
            The DCS view only; members that say primary by their own word are
            PatroniMultiplePrimaries (which also sees one that already left the DCS view).
          |||,
          expr: 'patroni_cluster_leaders > 1',
          labels: { severity: 'critical' },
          annotations: {
            summary: 'GET /cluster of Patroni cluster {{ $labels.scope }} lists {{ $value }} leaders.',
            description: |||
              For ${for}, GET /cluster of scope {{ $labels.scope }} has listed {{ $value }} members with the
              role leader or standby_leader. One Raft replica holds two leader keys: the DCS itself is
              inconsistent; check which members say primary (patroni_cluster_primaries).
            |||,
          },
        },
        {
          alert: 'PatroniMemberNotRunning',
          expr: |||
            max without (state) (
              patroni_member_state == 1
              unless ignoring(state)
                patroni_member_state{state=~"running|streaming|in archive recovery"} == 1
            )
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'PostgreSQL of member {{ $labels.member }} (cluster {{ $labels.scope }}) is not running.',
            description: |||
              Member {{ $labels.member }} of scope {{ $labels.scope }} has been in state
              "{{ with printf "patroni_member_state{scope=%q,member=%q} == 1" $labels.scope $labels.member | query }}{{ (. | first).Labels.state }}{{ end }}"
              for ${for} (not running, streaming or in archive recovery; patroni_member_state = {{ $value }}).
            |||,
          },
        },
        {
          alert: 'PatroniMemberApiUnreachable',
          expr: 'patroni_member_api_up == 0',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'REST API of member {{ $labels.member }} (cluster {{ $labels.scope }}) does not answer.',
            description: |||
              GET /patroni of member {{ $labels.member }} (scope {{ $labels.scope }}) has failed for ${for}
              (patroni_member_api_up = {{ $value }}): Patroni on that member is down or unreachable.
            |||,
          },
        },
        {
          alert: 'PatroniRoleMismatch',
          expr: 'patroni_member_role_mismatch == 1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Member {{ $labels.member }} (cluster {{ $labels.scope }}) contradicts the DCS view of its role.',
            description: |||
              For ${for} the role member {{ $labels.member }} of scope {{ $labels.scope }} reports in its own
              GET /patroni has contradicted its role in GET /cluster (mismatch = {{ $value }}). This is the
              sign of a frozen DCS view: typically the Raft quorum is gone and the former leader has
              demoted itself while /cluster still lists it as leader.
            |||,
          },
        },
        {
          alert: 'PatroniReplicationLagHigh',
          expr: 'patroni_member_lag_bytes > 16777216',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Replica {{ $labels.member }} (cluster {{ $labels.scope }}) lags {{ $value | humanize1024 }}B behind the leader.',
            description: |||
              Member {{ $labels.member }} of scope {{ $labels.scope }} has lagged more than 16 MiB
              (one WAL segment) behind the leader for ${for} (lag = {{ $value | humanize1024 }}B). A replica
              lagging more than maximum_lag_on_failover (1 MiB by default) is not a failover candidate.
            |||,
          },
        },
        {
          alert: 'PatroniTimelineDiverged',
          expr: 'patroni_member_timeline != ignoring(member) group_left() patroni_cluster_timeline',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Member {{ $labels.member }} (cluster {{ $labels.scope }}) is on timeline {{ $value }}, not the cluster\'s.',
            description: |||
              Member {{ $labels.member }} of scope {{ $labels.scope }} has been on timeline {{ $value }}
              for ${for} while the cluster is on timeline
              {{ with printf "max(patroni_cluster_timeline{scope=%q})" $labels.scope | query }}{{ . | first | value }}{{ end }}.
              It did not follow the last promotion (pg_rewind failed or it needs a reinit).
            |||,
          },
        },
        {
          alert: 'PatroniFrequentLeaderChanges',
          comment:: |||
            Rounded, as PatroniRaftFrequentLeaderChanges: 3 changes read 3.046 when the
            evaluation falls between two scrapes (alerts/tests/alerts.test.yml).
          |||,
          expr: 'round(increase(patroni_cluster_leader_changes_total[1h])) > 3',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Leader of Patroni cluster {{ $labels.scope }} changed {{ $value | humanize }} times in 1h.',
            description: |||
              The exporter saw {{ $value | humanize }} Patroni leader changes in scope {{ $labels.scope }}
              within the last hour (more than 3). Each change is a switchover or a failover.
            |||,
          },
        },
        {
          alert: 'PatroniSyncStandbyMissing',
          comment:: |||
            Not for a cluster whose dynamic configuration says synchronous_mode off (it has no
            sync standby by design), nor for a standby cluster (Patroni runs its replicas
            asynchronously whatever synchronous_mode says), nor in quorum mode. Fires while
            /config has not been read (patroni_config_synchronous_mode absent).
          |||,
          expr: |||
            patroni_cluster_sync_standbys == 0
            and patroni_cluster_members > 1
            unless ignoring(member, role) (patroni_member_role{role="quorum_standby"} == 1)
            unless ignoring(mode) (patroni_config_synchronous_mode{mode="off"} == 1)
            unless (patroni_cluster_standby == 1)
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Patroni cluster {{ $labels.scope }} has no synchronous standby.',
            description: |||
              Scope {{ $labels.scope }} has had {{ $value }} synchronous standbys for ${for} although it has
              several members. With synchronous_mode_strict off the primary commits asynchronously:
              a failover now can lose committed transactions.
            |||,
          },
        },
        {
          alert: 'PatroniNoFailoverCandidate',
          comment:: |||
            Failover readiness: the exporter applies Patroni's own is_failover_possible rule to
            every member but the leader (docs/metrics.md#failover-readiness).
          |||,
          expr: |||
            patroni_cluster_failover_candidates == 0
            and patroni_cluster_leaders == 1
            and patroni_cluster_members > 1
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Patroni cluster {{ $labels.scope }} has no failover candidate: if the leader dies now, nobody is promoted.',
            description: |||
              No member of scope {{ $labels.scope }} could replace the leader ({{ $value }} candidates for ${for}).
              Excluded:{{ range printf "patroni_member_failover_excluded{scope=%q} == 1" $labels.scope | query | sortByLabel "member" }} {{ .Labels.member }} ({{ .Labels.reason }}){{ end }}.
            |||,
          },
        },
        {
          alert: 'PatroniFailsafeModeActive',
          expr: 'patroni_member_failsafe_active == 1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Member {{ $labels.member }} (cluster {{ $labels.scope }}) runs in failsafe mode: the DCS is unreachable.',
            description: |||
              Member {{ $labels.member }} of scope {{ $labels.scope }} has reported failsafe_mode_is_active = {{ $value }} for ${for}:
              it cannot write to the DCS and keeps its role only because every member answered its
              POST /failsafe. Losing one more member now demotes the primary.
            |||,
          },
        },
        {
          alert: 'PatroniSyncStateMismatch',
          expr: 'patroni_member_sync_state_mismatch == 1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Member {{ $labels.member }} (cluster {{ $labels.scope }}) is a sync standby in the DCS but not in the leader\'s PostgreSQL.',
            description: |||
              For ${for} (mismatch = {{ $value }}) GET /cluster has called {{ $labels.member }} a synchronous standby of scope {{ $labels.scope }}
              while the leader's pg_stat_replication does not replicate to it synchronously. The DCS view is stale
              or the standby stopped streaming; Patroni may promote a member that lacks committed data.
            |||,
          },
        },
        {
          alert: 'PatroniWalReplayPaused',
          expr: 'patroni_member_wal_replay_paused == 1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'WAL replay is paused on {{ $labels.member }} (cluster {{ $labels.scope }}).',
            description: |||
              Member {{ $labels.member }} of scope {{ $labels.scope }} has had WAL replay paused (paused = {{ $value }}) for ${for}
              (pg_wal_replay_pause()): it keeps receiving WAL but its data gets older, and its replay lag
              will exclude it from failover once it exceeds maximum_lag_on_failover.
            |||,
          },
        },
        {
          alert: 'PatroniWatchdogFailed',
          expr: 'patroni_member_watchdog_failed == 1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Watchdog of {{ $labels.member }} (cluster {{ $labels.scope }}) failed: it will not be promoted.',
            description: |||
              Member {{ $labels.member }} of scope {{ $labels.scope }} has reported watchdog_failed = {{ $value }} for ${for}:
              the watchdog is required by its configuration but not healthy, so Patroni will not promote it.
            |||,
          },
        },
        {
          alert: 'PatroniPostgresRestarted',
          expr: 'changes(patroni_member_postmaster_start_time_seconds[15m]) > 0',
          labels: { severity: 'info' },
          annotations: {
            summary: 'PostgreSQL of {{ $labels.member }} (cluster {{ $labels.scope }}) restarted.',
            description: |||
              The postmaster start time of {{ $labels.member }} in scope {{ $labels.scope }} changed
              {{ $value }} time(s) in the last 15m: PostgreSQL was restarted (planned, crash, or rejoin).
            |||,
          },
        },
        {
          alert: 'PatroniLeaderChanged',
          expr: 'increase(patroni_cluster_leader_changes_total[10m]) > 0',
          labels: { severity: 'info' },
          annotations: {
            summary: 'Patroni cluster {{ $labels.scope }} has a new leader (switchover or failover).',
            description: |||
              The exporter saw the leader key of scope {{ $labels.scope }} move in the last 10m
              (about {{ $value | humanize }} change(s)). Check GET /history for whether it was planned.
            |||,
          },
        },
        {
          alert: 'PatroniPaused',
          expr: 'patroni_cluster_paused == 1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Patroni cluster {{ $labels.scope }} has been in maintenance mode for over ${for}.',
            description: |||
              Scope {{ $labels.scope }} has been paused (maintenance mode, paused = {{ $value }}) for ${for}:
              Patroni does not fail over automatically while paused.
            |||,
          },
        },
        {
          alert: 'PatroniPendingRestart',
          expr: 'patroni_member_pending_restart == 1',
          labels: { severity: 'info' },
          annotations: {
            summary: 'Member {{ $labels.member }} (cluster {{ $labels.scope }}) needs a restart to apply its configuration.',
            description: |||
              Member {{ $labels.member }} of scope {{ $labels.scope }} has had pending_restart = {{ $value }}
              for ${for}: a changed PostgreSQL parameter only takes effect after a restart.
            |||,
          },
        },
      ],
    },
    {
      name: 'patroni-raft.exporter',
      rules: [
        {
          alert: 'PatroniExporterDown',
          comment:: |||
            The job selector is a deployment choice: _config.jobSelector of the mixin, the job
            name that scrapes the exporter (in COS the jobs are named juju_<model>_..._<app>_...:
            use juju_application=).
          |||,
          expr: 'up{${jobSelector}} == 0',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Prometheus cannot scrape {{ $labels.instance }} (job {{ $labels.job }}): Patroni alerts are blind.',
            description: |||
              Scrape target {{ $labels.instance }} of job {{ $labels.job }} has been down for ${for}
              (up = {{ $value }}). While it is down every patroni_* series is stale and no other
              Patroni or Raft alert can fire.
            |||,
          },
        },
        {
          alert: 'PatroniExporterPollStale',
          expr: 'time() - patroni_exporter_last_poll_timestamp_seconds > 60',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Exporter data for Patroni cluster {{ $labels.scope }} is {{ $value | humanizeDuration }} old.',
            description: |||
              The last completed poll of scope {{ $labels.scope }} by {{ $labels.instance }} is
              {{ $value | humanizeDuration }} old (poll interval ~5 s). Every patroni_* value of this
              scope is frozen: alerts cannot fire on it.
            |||,
          },
        },
        {
          alert: 'PatroniExporterPollErrors',
          comment:: |||
            The kinds are those a retry does not heal: a password or token refused (auth),
            a certificate, a payload or a host the exporter does not accept. The others mostly
            say a peer is down or busy (connect, refused, timeout, http_status): the
            unreachability and quorum alerts speak. Not forbidden (etcd refused a request to
            the exporter's etcd user): PatroniEtcdFactUnreadable speaks for it, naming the fact,
            quiet while etcd has no quorum; on etcd 3.6.0-3.6.9 with the least-privileged role
            Status is refused in every poll, and a second alert for that one cause would be noise.
          |||,
          expr: |||
            rate(patroni_exporter_poll_errors_total{kind=~"auth|tls|decode|protocol|body_too_large|api_url_not_allowed"}[5m]) > 0
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Exporter keeps failing to read {{ $labels.source }} of cluster {{ $labels.scope }} ({{ $labels.kind }} errors).',
            description: |||
              Polls of source {{ $labels.source }} (scope {{ $labels.scope }}) have failed with
              {{ $labels.kind }} errors for ${for} ({{ printf "%.2f" $value }} errors/s). These errors are
              configuration or compatibility problems (password, certificate, etcd role, unexpected payload) that
              do not heal by themselves.
            |||,
          },
        },
        {
          alert: 'PatroniExporterConfigReloadFailed',
          comment:: |||
            The gauge is 0 from a refused reload (SIGHUP) until the next good one: it does not
            flap, so the window only lets an operator who fixes the file and reloads again at
            once (a configuration manager's next run) go unpaged. It changes within a second of
            the SIGHUP (0.3 s in tests/it/reload.rs).
          |||,
          expr: 'patroni_exporter_config_last_reload_successful == 0',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Exporter {{ $labels.instance }} refused its reloaded configuration: it still watches the clusters of the previous one.',
            description: |||
              The last reload of {{ $labels.instance }} (job {{ $labels.job }}) failed ${for} ago or
              more (last_reload_successful = {{ $value }}): the file cannot work (bad YAML, a
              cluster listed twice, an unreadable secret).
              Every cluster it ran goes on being watched with the previous configuration; what
              the new file adds or changes is not applied. The cause is in the exporter's log.
            |||,
          },
        },
      ],
    },
    {
      name: 'patroni-raft.margins',
      comment:: |||
        How close the next outage is (issue #20): each alert is a warning that comes before the
        page, with the margin it measures in its description.
      |||,
      rules: [
        {
          alert: 'PatroniRaftQuorumNoMargin',
          comment:: |||
            The best view of every exporter (max): one exporter that cannot see a voter must not
            claim the cluster has no margin. 5m: longer than a member restart or a failover
            (a killed member is back with a quorum in 19-21 s on the lab cluster, a failover
            takes ~25 s), shorter than a forgotten dead unit.
          |||,
          expr: 'max without (${aggregationLabels}) (patroni_raft_quorum_margin) == 0',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft of Patroni cluster {{ $labels.scope }} has no margin: one more voter down loses the quorum.',
            description: |||
              For ${for} the Raft DCS of scope {{ $labels.scope }} has had exactly a majority of healthy
              voters ({{ with printf "patroni_raft_voters{scope=%q}" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }}
              voters, {{ with printf "patroni_raft_voters_with_quorum{scope=%q}" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }}
              report has_quorum; margin {{ $value }}). The next failure of a voter stops every write to
              the DCS: the primary demotes itself unless failsafe mode keeps it.
            |||,
          },
        },
        {
          alert: 'PatroniFailoverDataAtRisk',
          comment:: |||
            Above maximum_lag_on_failover Patroni refuses to promote the best replica: a failover
            now would either not happen or (forced) lose this much WAL. 5m, as
            PatroniReplicationLagHigh: a bulk load or a VACUUM spikes the lag for minutes.
          |||,
          expr: 'patroni_cluster_failover_data_at_risk_bytes > patroni_config_maximum_lag_on_failover_bytes',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'A failover of Patroni cluster {{ $labels.scope }} now would lose {{ $value | humanize1024 }}B of WAL.',
            description: |||
              For ${for} the best replica of scope {{ $labels.scope }} has received
              {{ $value | humanize1024 }}B less WAL than the leader wrote, more than
              maximum_lag_on_failover: if the leader dies now, Patroni promotes nobody, and a manual
              failover loses those transactions.
            |||,
          },
        },
        {
          alert: 'PatroniReplicationLagTime',
          comment:: |||
            Seconds since the last replayed transaction, only while the replica is behind (0
            when caught up, so an idle primary does not fire it).
          |||,
          expr: 'patroni_member_replay_lag_seconds > 300',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Replica {{ $labels.member }} (cluster {{ $labels.scope }}) replays {{ $value | humanizeDuration }} behind.',
            description: |||
              Member {{ $labels.member }} of scope {{ $labels.scope }} is behind the leader and the
              last transaction it replayed committed {{ $value | humanizeDuration }} ago (for ${for}).
              Queries on it read old data; a failover to it first replays the backlog.
            |||,
          },
        },
        {
          alert: 'PatroniHaLoopStalled',
          comment:: |||
            GET /liveness answers 503 only after the HA loop has not run for ttl (2 x ttl on a
            replica: Patroni's api.py do_GET_liveness), so 503 is already 30-60 s of stall with
            the defaults; 1m more rules out a loop that was merely slow once.
          |||,
          expr: 'patroni_member_liveness == 0',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Patroni\'s HA loop on {{ $labels.member }} (cluster {{ $labels.scope }}) is stalled while its REST API answers.',
            description: |||
              GET /liveness of member {{ $labels.member }} (scope {{ $labels.scope }}) has answered 503
              for ${for} (liveness = {{ $value }}): its REST API runs, its HA loop has not run for ttl (2 x ttl on a replica). A
              stalled loop renews no DCS key and makes no decision: on the leader the key expires, but the
              replicas ask this member's REST API before they race, it still answers primary, and nobody
              takes over; the cluster runs without a leader key (no switchover or failover possible) until
              the loop runs again. A replica no longer follows changes.
            |||,
          },
        },
        {
          alert: 'PatroniLeaderClockSkew',
          comment:: |||
            Patroni's Raft KV stamps the leader key's expiry with the primary's clock and expires
            it on the Raft leader's (dcs/raft.py, KVStoreTTL). The slack between two renewals is
            ttl - loop_wait (20 s by default; Patroni requires ttl >= loop_wait + 2 x
            retry_timeout); a quarter of it (5 s) is half a retry_timeout, and an order of
            magnitude above the error of the measure (two Date headers: +-1 s plus the round
            trips). 2m: clock skew does not come and go; one slow answer should not fire it.
          |||,
          expr: |||
            abs(patroni_cluster_leader_clock_skew_seconds)
            > (patroni_config_ttl_seconds - patroni_config_loop_wait_seconds) / 4
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'The primary\'s clock in cluster {{ $labels.scope }} is {{ $value | humanizeDuration }} off the Raft leader\'s.',
            description: |||
              For ${for} the clocks of the primary's host and of the Raft leader's host in scope
              {{ $labels.scope }} have differed by {{ $value | humanizeDuration }}, more than a quarter of
              ttl - loop_wait. The leader key's lifetime is stamped by one clock and ended by the
              other: a primary behind the Raft leader loses its key that much early (a needless
              failover); one ahead keeps it that much longer after it dies (a longer outage).
            |||,
          },
        },
        {
          alert: 'PatroniMemberRestSlow',
          comment:: |||
            Patroni gives the requests its members send one another 2 s (patroni/ha.py:
            fetch_node_status, GET /patroni in the leader race, and call_failsafe_member, POST
            /failsafe: timeout=2, hard-coded; patroni_member_request_timeout_seconds). Half of it
            is the threshold: a member that takes 1 s to answer the exporter is one slow link or
            busy Patroni away from failing those requests, after which failsafe mode no longer
            keeps the primary (patroni #3550) and a slower link demotes it (canonical/
            postgresql-operator #1164). The exporter's own default poll timeout is also 2 s: above
            it the gauge is gone and PatroniMemberApiUnreachable speaks. The best view of every
            exporter (min): one exporter on a slow path must not blame the member. 5m: on the
            4.1.5 lab (tests/e2e/scenarios.sh) the largest round trip through a switchover, a
            failover and a quorum loss was 0.26 s, and every one above 0.1 s lasted one poll;
            the risk is latent (it bites at the next leader race or DCS loss), so waiting costs
            nothing.
          |||,
          expr: |||
            min without (${aggregationLabels}) (patroni_member_rest_round_trip_seconds)
            > ignoring (member) group_left ()
            0.5 * max without (${aggregationLabels}) (patroni_member_request_timeout_seconds)
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Member {{ $labels.member }} of cluster {{ $labels.scope }} takes {{ $value | humanizeDuration }} to answer GET /patroni; Patroni gives its members 2 s.',
            description: |||
              For ${for} the GET /patroni of member {{ $labels.member }} (scope {{ $labels.scope }})
              has taken {{ $value | humanizeDuration }} from every exporter watching it, more than half
              the 2 s Patroni's members give one another for that request (leader race) and for POST
              /failsafe. Past 2 s the other members count it unhealthy in a leader race, and while the
              DCS is unreachable failsafe mode cannot keep the primary: it demotes itself although every
              member runs. A slow link (or a busy Patroni) to this member is the early sign.
            |||,
          },
        },
      ],
    },
    {
      name: 'patroni-raft.split-views',
      comment:: |||
        What comparing every member and every Raft node shows (issue #19): one member's /cluster is
        one Raft replica's word.
      |||,
      rules: [
        {
          alert: 'PatroniMultiplePrimaries',
          comment:: |||
            Two polls with two primaries within a minute, counted by the exporter so that a window
            shorter than the scrape interval is not missed. The partition lab measured the window
            of an isolated leader: the majority promotes another member when the old one's key
            expires (~23 s after the cut), the old one demotes itself ~10 s later (~34 s): two
            polls at the default 5 s interval, five at 2 s; any `for:` of 10 s or more would never
            fire. Two polls, not one: a single slow answer during a switchover (the old primary
            demotes before the new one promotes) must not page. Resolves a minute after the old
            primary demotes.
            Rounded: increase() extrapolates to the end of its window when the evaluation falls
            between two scrapes, so one poll read 1.057 (5 s scrapes, evaluated 2 s after one)
            and "more than 1" paged on it. Rounding holds for scrape intervals up to 15 s (one
            poll reads at most 60/45 = 1.33 in a 1m window).
          |||,
          expr: 'max without (${aggregationLabels}) (round(increase(patroni_cluster_multiple_primaries_polls_total[1m]))) > 1',
          labels: { severity: 'critical' },
          annotations: {
            summary: @'TWO PRIMARIES in Patroni cluster {{ $labels.scope }}: {{ with printf "patroni_member_reported_role{scope=%q,role=~\"primary|standby_leader\"} == 1" $labels.scope | query | sortByLabel "member" }}{{ range $i, $s := . }}{{ if $i }} and {{ end }}{{ $s.Labels.member }}{{ end }}{{ else }}(gone now){{ end }} say primary.',
            description: |||
              In {{ $value | printf "%.0f" }} polls of the last minute more than one member of scope
              {{ $labels.scope }} said primary in its own GET /patroni
              ({{ with printf "patroni_cluster_primaries{scope=%q}" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }} now).
              {{ with printf "patroni_member_in_dcs{scope=%q} == 0" $labels.scope | query | sortByLabel "member" }}Out of the DCS view: {{ range $i, $s := . }}{{ if $i }}, {{ end }}{{ $s.Labels.member }}{{ end }} (an isolated old leader that has not demoted itself yet). {{ end }}Both
              servers may accept writes: the data diverges, and the old primary's writes after the fork
              are lost when it is rewound. Fence the one out of the DCS view now.
            |||,
          },
        },
        {
          alert: 'PatroniDcsViewsDiverge',
          comment:: |||
            Longer than loop_wait (10 s) plus a poll (5 s), and two scrapes at 15 s: replicas apply
            the Raft log within milliseconds, and a key that changes between two members' answers
            makes the views differ for one poll at most.
            Only answers are evidence. patroni_cluster_dcs_views counts the views read in the last
            poll: when the stale member's own GET /cluster times out it reads 1, though that view
            is merely unknown (patroni_member_dcs_view_read 0; the partition lab's Raft cut on a
            loaded machine). So the alert, once pending or firing, holds while every exporter has
            a member unread that differed in the last 10m, and resolves only on evidence: one
            exporter that read every such member's view and found it equal. A member unread alone
            never starts it, nor holds it: a member stopped for maintenance while a key changes
            between two others' answers for one poll is not a divergence (the membership e2e's
            stop: that hold on any unread member fired it). Past 10m unread, the member is unknown,
            not stale (PatroniMemberApiUnreachable says so). Its value is the number of views read
            (0 when none was).
          |||,
          expr: |||
            max without (${aggregationLabels}) (patroni_cluster_dcs_views) > 1
            or
            (
                (
                    max without (${aggregationLabels}) (patroni_cluster_dcs_views)
                  or
                    0 * min without (${aggregationLabels}) (sum without (member) (1 - patroni_member_dcs_view_read))
                )
              and
                min without (${aggregationLabels}) (
                    count without (member) (
                        max without (field) (max_over_time(patroni_member_dcs_view_differs[10m])) == 1
                      and
                        patroni_member_dcs_view_read == 0
                    )
                  or
                    0 * sum without (member) (patroni_member_dcs_view_read)
                ) > 0
              and ignoring (alertname, alertstate, severity)
                ALERTS{alertname="PatroniDcsViewsDiverge"}
            )
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Members of Patroni cluster {{ $labels.scope }} see different DCS views.',
            description: |||
              For ${for} the members of scope {{ $labels.scope }} have answered GET /cluster from Raft
              replicas that disagree ({{ $value }} views among those read in the last poll):
              {{ with printf "max by (member, field) (max_over_time(patroni_member_dcs_view_differs{scope=%q}[${for}]) == 1)" $labels.scope | query | sortByLabel "field" | sortByLabel "member" }}{{ range $i, $s := . }}{{ if $i }}, {{ end }}{{ $s.Labels.member }} ({{ $s.Labels.field }}){{ end }}{{ else }}?{{ end }}
              differed from the view most members share in the last ${for}.
              {{ with printf "min by (member) (patroni_member_dcs_view_read{scope=%q}) == 0" $labels.scope | query | sortByLabel "member" }}Not read in the last poll, so unknown (never counted as agreeing): {{ range $i, $s := . }}{{ if $i }}, {{ end }}{{ $s.Labels.member }}{{ end }}. {{ end }}A member on a stale or diverged replica acts on
              a DCS the majority does not share (it is not a failover candidate).
            |||,
          },
        },
        {
          alert: 'PatroniRaftVoterSetsDiffer',
          comment:: |||
            Patroni's partner list is static per process and pysyncobj applies a membership change
            on every node within a replication round: a difference that outlives three polls is a
            configuration fault (a node started with a stale or incomplete partner_addrs).
          |||,
          expr: 'max without (${aggregationLabels}) (patroni_raft_voter_sets) > 1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Raft nodes of Patroni cluster {{ $labels.scope }} disagree on who votes ({{ $value }} voter sets).',
            description: |||
              For ${for} the Raft nodes of scope {{ $labels.scope }} have counted their majority against
              {{ $value }} different voter sets:
              {{ with printf "max by (node) (patroni_raft_voter_set_differs{scope=%q} == 1)" $labels.scope | query | sortByLabel "node" }}{{ range $i, $s := . }}{{ if $i }}, {{ end }}{{ $s.Labels.node }}{{ end }}{{ else }}?{{ end }}
              differ from the others. Such a node may be isolated, or count a majority the others do
              not: compare raft.partner_addrs in each member's patroni.yml.
            |||,
          },
        },
      ],
    },
    {
      name: 'patroni-raft.standby',
      comment:: |||
        Standby clusters (Patroni's standby_cluster:, issue #22): the standby leader follows a
        source cluster's primary; nothing in either cluster's DCS says when it stops following.
      |||,
      rules: [
        {
          alert: 'PatroniStandbyLeaderNotStreaming',
          comment:: |||
            The standby leader's own replication_state (GET /patroni) is not streaming: it replays
            only what reaches the archive, or nothing. 1m: PostgreSQL's walreceiver retries a lost
            connection every wal_retrieve_retry_interval (5 s by default), so a restart of the
            source's walsender or a source switchover is over well within it. Measured
            (tests/e2e/standby.sh, 3.3.8 and 4.1.5, three runs): the source primary stopped, the
            standby leader said so itself as soon as the stop returned (2.4-3.0 s), the alert
            pending 2.5-4.9 s and firing 62.9-65.3 s after; restarted, streaming after 4.9-7.9 s.
          |||,
          expr: 'patroni_standby_leader_streaming == 0',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Standby leader {{ $labels.member }} of standby cluster {{ $labels.scope }} does not stream from its source.',
            description: |||
              For ${for} the standby leader {{ $labels.member }} of scope {{ $labels.scope }} has not been
              streaming from its source cluster (streaming = {{ $value }}; {{ with printf "patroni_standby_leader_archive_recovery{scope=%q,member=%q}" $labels.scope $labels.member | query }}{{ if eq (. | first | value) 1.0 }}it replays from the archive only{{ else }}it neither streams nor replays from an archive{{ end }}{{ else }}?{{ end }}).
              Its data ages with every transaction of the source: a failover to this region now loses them.
            |||,
          },
        },
        {
          alert: 'PatroniStandbyLagHigh',
          comment:: |||
            The source leader's position minus the standby leader's replayed one (standby_of in the
            exporter's --config.file). 16 MiB (one WAL segment) and 5m, as PatroniReplicationLagHigh:
            a bulk load on the source spikes the lag for minutes. A deliberately delayed standby
            (recovery_min_apply_delay) lags by design: raise the threshold for it.
          |||,
          expr: 'patroni_standby_lag_bytes > 16777216',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Standby cluster {{ $labels.scope }} lags {{ $value | humanize1024 }}B behind its source {{ $labels.source_scope }}.',
            description: |||
              For ${for} the standby leader of scope {{ $labels.scope }} has replayed more than 16 MiB
              (one WAL segment) less than the leader of its source cluster {{ $labels.source_scope }} wrote
              (lag = {{ $value | humanize1024 }}B): losing the source's region now loses that much WAL.
            |||,
          },
        },
      ],
    },
    {
      name: 'patroni-raft.etcd',
      comment:: |||
        Patroni clusters on etcd v3 (issue #41): whether this Patroni cluster can keep and take
        its leader key, from the verdict the exporter judges for every DCS (patroni_dcs_quorum,
        the same family as Raft's on dcs="raft"). etcd's own health (no leader, members down,
        quota low, slow disks, gRPC errors) is etcd-mixin's, from etcd's own /metrics: these
        rules do not repeat it (docs/runbooks.md says which of its alerts to run beside them).
      |||,
      rules: [
        {
          alert: 'PatroniEtcdQuorumLost',
          comment:: |||
            As PatroniRaftQuorumLost: the best verdict of every exporter watching the scope, so
            that one exporter cut off with a minority does not page for a healthy etcd. 1m, as
            Raft's: a quorum loss stops the leader key's renewal at once and does not heal by
            itself; an etcd leader election (its leader restarted or cut off) takes about an
            election timeout (1 s by default), one poll of no_leader at most, and a minute is
            12 polls.
          |||,
          expr: 'max without (${aggregationLabels}) (patroni_dcs_quorum{dcs="etcd"}) == 0',
          labels: { severity: 'critical' },
          annotations: {
            summary: 'etcd of Patroni cluster {{ $labels.scope }} lost its quorum: nobody can take the leader key; %s' % ifFailsafe('failsafe mode keeps the primary, one more failure demotes it.', 'the primary demotes itself, writes stop.'),
            description: |||
              No exporter confirms an etcd quorum for scope {{ $labels.scope }} (best verdict
              {{ $value }}), and the evidence says it is lost (%(evidence)s):
              %(answering)s
              of %(members)s voting etcd members answer the exporter.
              %(failsafe)s
            ||| % {
              evidence: fromLosingEtcdExporter('patroni_etcd_quorum_evidence{scope=%q} == 1', 'label "evidence"'),
              answering: fromLosingEtcdExporter('patroni_etcd_members_answering{scope=%q}'),
              members: fromLosingEtcdExporter('patroni_etcd_members{scope=%q}'),
              failsafe: ifFailsafe(
                'Failsafe mode is active: the primary keeps running without the DCS while every member answers it over REST; losing one more member demotes it. Nobody can take the leader key: no failover, no switchover.',
                'Without an etcd quorum Patroni can neither renew nor take the leader key: the leader demotes itself after retry_timeout, nobody can take the leader key (no failover, no switchover), and the members may keep answering GET /cluster with the last view of their watch cache of etcd.'
              ),
            },
          },
        },
        {
          alert: 'PatroniEtcdQuorumNotVisible',
          comment:: |||
            As PatroniRaftQuorumNotVisible: the exporter's blindness, not evidence of a loss.
            2m filters a restart of the exporter or of one etcd member.
          |||,
          expr: 'max without (${aggregationLabels}) (patroni_dcs_quorum{dcs="etcd"}) == -1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'The exporter cannot tell whether etcd of Patroni cluster {{ $labels.scope }} has a quorum.',
            description: |||
              For ${for} no exporter could confirm or refute the etcd quorum of scope {{ $labels.scope }}
              (best verdict {{ $value }}):
              {{ with printf "max(patroni_etcd_members_answering{scope=%q})" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }}
              of {{ with printf "max(patroni_etcd_members{scope=%q})" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }}
              voting etcd members answer, without a leader named by a majority (or, where Status is
              refused to the exporter's user, without a majority answering /health true: an active
              alarm makes /health false too). Failed etcd requests in the last 5m by kind:{{ range printf "sum by (kind) (increase(patroni_exporter_poll_errors_total{scope=%q,source=\"etcd\"}[5m])) > 0" $labels.scope | query | sortByLabel "kind" }} {{ .Labels.kind }}{{ else }} none{{ end }}.
              This is the exporter's blindness, not evidence of a loss: check the network between the
              exporter and etcd's client port, --etcd.endpoint, the TLS files and the etcd user.
            |||,
          },
        },
        {
          alert: 'PatroniEtcdQuorumNoMargin',
          comment:: |||
            As PatroniRaftQuorumNoMargin, and only while the quorum is confirmed (a lost one is
            PatroniEtcdQuorumLost). The best view of every exporter (max): one exporter that
            cannot reach an etcd member must not claim the cluster has no margin. 5m: longer
            than an etcd member's restart or a rolling upgrade's step, shorter than a forgotten
            dead member.
          |||,
          expr: |||
            max without (${aggregationLabels}) (patroni_dcs_quorum_margin{dcs="etcd"}) == 0
            and max without (${aggregationLabels}) (patroni_dcs_quorum{dcs="etcd"}) == 1
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'etcd of Patroni cluster {{ $labels.scope }} has no margin: one more etcd member down loses the quorum.',
            description: |||
              For ${for} the etcd cluster of scope {{ $labels.scope }} has had exactly a majority of its
              voting members healthy ({{ with printf "max(patroni_etcd_members_answering{scope=%q})" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }}
              of {{ with printf "max(patroni_etcd_members{scope=%q})" $labels.scope | query }}{{ . | first | value }}{{ else }}?{{ end }}
              answer; margin {{ $value }}). The next etcd member that fails stops every write to etcd:
              nobody can take the leader key, and the primary demotes itself unless failsafe mode keeps it.
            |||,
          },
        },
        {
          alert: 'PatroniEtcdAlarm',
          comment:: |||
            etcd raises an alarm and keeps it until an operator disarms it (etcdctl alarm
            disarm): nothing transient to filter. Both stop the writes that take the leader key
            (etcd's applierV3Capped and applierV3Corrupt refuse puts, transactions and new
            leases; a lease keep-alive is no write, so the primary may keep its key): the
            cluster cannot fail over from that moment. The best view of every exporter (max).
          |||,
          expr: 'max without (${aggregationLabels}) (patroni_etcd_alarms{alarm=~"NOSPACE|CORRUPT"}) > 0',
          labels: { severity: 'critical' },
          annotations: {
            summary: 'etcd of Patroni cluster {{ $labels.scope }} raises the {{ $labels.alarm }} alarm: {{ if eq $labels.alarm "NOSPACE" }}etcd takes no writes{{ else }}etcd refuses reads and writes{{ end }}, nobody can take the leader key.',
            description: |||
              {{ $value }} etcd member(s) of scope {{ $labels.scope }} raise the {{ $labels.alarm }} alarm.
              {{ if eq $labels.alarm "NOSPACE" }}The database reached its quota (--quota-backend-bytes): until the alarm is
              disarmed etcd refuses every write that adds data (puts, transactions, new leases). The primary
              may keep renewing the lease of its leader key (a keep-alive is no write), but nobody can take
              the leader key: no failover, no switchover, and no member key or configuration change is
              stored. Compact and defragment etcd, then disarm the alarm.{{ else }}etcd's corruption check found a
              member whose data differs from the others': while the alarm is active etcd refuses reads and
              writes (lease keep-alives excepted), so nobody can take the leader key: no failover, no
              switchover. Replace the corrupt member from a healthy one, then disarm the alarm.{{ end }}
            |||,
          },
        },
        {
          alert: 'PatroniEtcdFactUnreadable',
          comment:: |||
            Per exporter (not aggregated): it says what this exporter cannot see, a
            configuration fault (typically its etcd user's permissions) that does not heal by
            itself. Only while this exporter confirms the quorum: without one etcd answers few
            reads, and PatroniEtcdQuorumLost or PatroniEtcdQuorumNotVisible speak. 10m rides
            over an etcd leader election or a member's restart, during which the facts read
            from the leader time out for a few polls.
          |||,
          expr: |||
            patroni_etcd_unreadable == 1
            unless ignoring (fact, dcs) patroni_dcs_quorum{dcs="etcd"} < 1
          |||,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'The exporter cannot read etcd\'s {{ $labels.fact }} for Patroni cluster {{ $labels.scope }}.',
            description: |||
              For ${for} {{ $labels.instance }} has not read the {{ $labels.fact }} of the etcd of scope
              {{ $labels.scope }} (unreadable = {{ $value }}), typically refused to its etcd user (etcd
              3.6.0-3.6.9 answer Status to root only, 3.6.9 MemberList too; the keys need read on
              Patroni's prefix). Nothing is judged from it:
              {{ if eq $labels.fact "status" }}the quorum verdict rests on /health, and the members' terms, indexes and database sizes are not shown{{ else if eq $labels.fact "alarms" }}an etcd alarm (NOSPACE, CORRUPT) would not be seen{{ else if eq $labels.fact "keys" }}members' stale views are not judged, and the leader key's lease is not read{{ else if eq $labels.fact "leader_lease" }}the time left on the leader key is not shown{{ else }}the voting members are counted from the last member list read, or the endpoints{{ end }}.
              The exporter's log names the refusal.
            |||,
          },
        },
        {
          alert: 'PatroniMemberDcsViewStale',
          comment:: |||
            The exporter compares each member's own GET /cluster (its leader and member names)
            with Patroni's keys read from etcd in the same poll, through etcd's leader, and only
            when the keys were the same in the poll before: a change landing between the two
            readings is not counted. Patroni serves /cluster from a cache fed by a watch of
            its prefix; a live watch delivers a change within milliseconds, a broken one is
            rebuilt after 1 s with a range read (retried within retry_timeout, 10 s), and the HA
            loop acts every loop_wait (10 s): about 25 s with a poll. 1m is more than twice
            that. The worst view of every exporter (min): stale only when every exporter that
            judged it says so.
          |||,
          expr: 'min without (${aggregationLabels}) (patroni_member_dcs_view_stale) == 1',
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Member {{ $labels.member }} of Patroni cluster {{ $labels.scope }} sees a DCS etcd no longer holds.',
            description: |||
              For ${for} the own GET /cluster of member {{ $labels.member }} (scope {{ $labels.scope }}) has
              named another leader or another member set than Patroni's keys read directly from etcd
              (stale = {{ $value }}): its watch of etcd stopped delivering changes (zalando/patroni
              #3359, #3426). It acts on a DCS view etcd no longer holds: a replica may follow a leader
              that is gone, and its /cluster, and patronictl run against it, mislead.
            |||,
          },
        },
      ],
    },
  ],

  prometheusAlerts+:: {
    groups+: rules.alerts($.patroniRaftRuleGroups, $._config).groups,
  },
}
