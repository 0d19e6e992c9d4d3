// How the rule sources of alerts.libsonnet become Prometheus rules: as data
// (prometheusAlerts, the mixin convention) and as the YAML text of
// alerts/patroni-raft.rules.yml (comments included; scripts/render-mixin.sh).
//
// A rule source is written as the YAML reads:
// * a text that ends with a newline (a jsonnet text block, |||) is a folded YAML scalar
//   (`>-`): its lines are joined by a space, except around a line that starts with a
//   space (more indented), whose line breaks stay; a one-line string is a plain scalar;
// * a hidden `comment` field is the YAML comment of the rule (or of the group);
// * the texts may hold placeholders, replaced from _config:
//     ${for}                 the rule's `for` (_config.forDurations[alert])
//     ${aggregationLabels}   _config.aggregationLabels
//     ${jobSelector}         _config.jobSelector
//   and they are written with the default cluster label `scope`: another
//   _config.clusterLabel rewrites `$labels.scope` and `{scope=%q` in them.
local sp(n) = std.join('', std.makeArray(n, function(i) ' '));
local isBlock(t) = std.endsWith(t, '\n');
local linesOf(t) = std.split(std.rstripChars(t, '\n'), '\n');
local isSpaced(l) = std.startsWith(l, ' ');

// YAML 1.2 line folding of a `>-` scalar (no empty lines in our texts: asserted).
local fold(t) =
  local ls = linesOf(t);
  assert std.length([l for l in ls if l == '']) == 0 : 'an empty line in a folded text: ' + t;
  std.foldl(
    function(acc, i) acc + (if isSpaced(ls[i - 1]) || isSpaced(ls[i]) then '\n' else ' ') + ls[i],
    std.range(1, std.length(ls) - 1),
    ls[0]
  );

local dq(s) = '"' + std.strReplace(std.strReplace(s, '\\', '\\\\'), '"', '\\"') + '"';
// A plain scalar unless YAML would read it otherwise (a selector may hold ': ' or ' #').
local plain(s) =
  if s == '' || std.length(std.findSubstr(': ', s)) > 0 || std.length(std.findSubstr(' #', s)) > 0
     || std.member('[]{}!&*|>\'"%@`#,?:-', s[0]) || std.endsWith(s, ':')
  then dq(s) else s;

local subst(t, c, forDuration) =
  local r1 = std.strReplace(t, '${aggregationLabels}', c.aggregationLabels);
  local r2 = std.strReplace(r1, '${jobSelector}', c.jobSelector);
  local r3 = if forDuration == null then r2 else std.strReplace(r2, '${for}', forDuration);
  assert std.length(std.findSubstr('${', r3)) == 0 : 'unreplaced placeholder in: ' + r3;
  if c.clusterLabel == 'scope' then r3
  else std.strReplace(std.strReplace(r3, '$labels.scope', '$labels.' + c.clusterLabel),
                      '{scope=%q', '{' + c.clusterLabel + '=%q');

local forOf(r, c) = if std.objectHas(c.forDurations, r.alert) then c.forDurations[r.alert] else null;

// One text, placeholders replaced, line structure kept (a block stays a block).
local text(t, c, f) = subst(t, c, f);
local value(t) = if isBlock(t) then fold(t) else t;

local expand(r, c) =
  local f = forOf(r, c);
  {
    alert: r.alert,
    comment: if std.objectHasAll(r, 'comment') then r.comment else null,
    expr: text(r.expr, c, f),
    'for': f,
    labels: r.labels,
    annotations: {
      summary: text(r.annotations.summary, c, f),
      description: text(r.annotations.description, c, f),
      runbook_url: c.runbookURLPattern % std.asciiLower(r.alert),
    },
  };

{
  // The rule groups as Prometheus reads them.
  alerts(groups, c):: {
    groups: [
      {
        name: g.name,
        rules: [
          local e = expand(r, c);
          { alert: e.alert, expr: value(e.expr) }
          + (if e['for'] == null then {} else { 'for': e['for'] })
          + {
            labels: e.labels,
            annotations: std.mapWithKey(function(k, v) value(v), e.annotations),
          }
          for r in g.rules
        ],
      }
      for g in groups
    ],
  },

  // The same rules as the text of a rules file, with the comments. header: a text block.
  yaml(groups, c, header)::
    local comment(n, t) = [sp(n) + (if l == '' then '#' else '# ' + l) for l in linesOf(t)];
    local scalar(n, k, v, quoted=false) =
      if isBlock(v) then [sp(n) + k + ': >-'] + [sp(n + 2) + l for l in linesOf(v)]
      else [sp(n) + k + ': ' + (if quoted then dq(v) else plain(v))];
    local rule(r) =
      local e = expand(r, c);
      [sp(6) + '- alert: ' + e.alert]
      + (if e.comment == null then [] else comment(8, e.comment))
      + scalar(8, 'expr', e.expr)
      + (if e['for'] == null then [] else scalar(8, 'for', e['for']))
      + [sp(8) + 'labels:']
      + std.flattenArrays([scalar(10, k, e.labels[k]) for k in std.objectFields(e.labels)])
      + [sp(8) + 'annotations:']
      + scalar(10, 'summary', e.annotations.summary, quoted=true)
      + scalar(10, 'description', e.annotations.description)
      + scalar(10, 'runbook_url', e.annotations.runbook_url);
    local group(i, g) =
      (if i > 0 then [''] else [])
      + (if std.objectHasAll(g, 'comment') then comment(2, g.comment) else [])
      + [sp(2) + '- name: ' + g.name, sp(4) + 'rules:']
      + std.join([''], [rule(r) for r in g.rules]);
    std.join('\n', comment(0, header) + ['groups:']
                   + std.flattenArrays(std.mapWithIndex(group, groups))),

  // Recording rules ({record, expr}, no placeholders) as Prometheus reads them ...
  records(groups):: {
    groups: [
      { name: g.name, rules: [{ record: r.record, expr: value(r.expr) } for r in g.rules] }
      for g in groups
    ],
  },

  // ... and as the text of a rules file, with the comments.
  recordsYaml(groups, header)::
    local comment(n, t) = [sp(n) + (if l == '' then '#' else '# ' + l) for l in linesOf(t)];
    local rule(r) =
      [sp(6) + '- record: ' + r.record]
      + (if isBlock(r.expr) then [sp(8) + 'expr: >-'] + [sp(10) + l for l in linesOf(r.expr)]
         else [sp(8) + 'expr: ' + plain(r.expr)]);
    local group(i, g) =
      (if i > 0 then [''] else [])
      + (if std.objectHasAll(g, 'comment') then comment(2, g.comment) else [])
      + [sp(2) + '- name: ' + g.name, sp(4) + 'rules:']
      + std.flattenArrays([rule(r) for r in g.rules]);
    std.join('\n', comment(0, header) + ['groups:']
                   + std.flattenArrays(std.mapWithIndex(group, groups))),
}
