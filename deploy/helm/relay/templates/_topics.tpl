{{/*
The topics relay derives from its configuration, and the ACLs its
commands need, as relay computes them (internal/topics: Plan and ACLs;
internal/config: Derived), for the Strimzi KafkaTopics and KafkaUser.
They read the chart's values only: relay.sourceTopics, relay.groupId and
the RELAY_* topic variables of relay.env (a variable set through
envFrom or extraEnv is not seen here). The chart's tests compare both
with relay's own functions for the same settings.
*/}}

{{/* A RELAY_* variable of relay.env, or relay's default when unset. Call
with (dict "ctx" $ "name" NAME "default" DEFAULT). */}}
{{- define "relay.envOr" -}}
{{- if hasKey .ctx.Values.relay.env .name -}}
{{- index .ctx.Values.relay.env .name | toString | trim -}}
{{- else -}}
{{- .default -}}
{{- end -}}
{{- end -}}

{{/* A duration as relay reads it (Go's: 720h, 1h30m, 1.5s) in whole
milliseconds, as time.Duration.Milliseconds gives it. Call with (dict
"value" DURATION "what" NAME). */}}
{{- define "relay.durationMs" -}}
{{- $parts := regexFindAll "[0-9]*\\.?[0-9]+(ns|us|µs|ms|s|m|h)" .value -1 -}}
{{- if or (not $parts) (ne (join "" $parts) .value) -}}
{{- fail (printf "%s: %q is not a duration (examples: 720h, 1h30m, 90s)" .what .value) -}}
{{- end -}}
{{- $units := dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0 -}}
{{- $ms := 0.0 -}}
{{- range $parts -}}
{{- $unit := regexFind "(ns|us|µs|ms|s|m|h)$" . -}}
{{- $ms = addf $ms (mulf (float64 (trimSuffix $unit .)) (get $units $unit)) -}}
{{- end -}}
{{- printf "%d" (int64 (floor (addf $ms 0.000001))) -}}
{{- end -}}

{{/*
The topic plan, as JSON: per source its output, tier, quarantine,
rejected and replay topics and the prefix of its tier topics; the state
topic; the retention each kind gets from `relay topics apply`.
*/}}
{{- define "relay.topicPlan" -}}
{{- $ctx := . -}}
{{- $group := .Values.relay.groupId -}}
{{- $tmpl := dict -}}
{{- range $name, $def := dict "RELAY_OUTPUT_TOPIC" "{topic}.valid" "RELAY_QUARANTINE_TOPIC" "{topic}.quarantine" "RELAY_REJECTED_TOPIC" "{topic}.rejected" "RELAY_REPLAY_TOPIC" "{topic}.replay" "RELAY_RETRY_TOPIC" "{topic}.retry.{delay}" "RELAY_STATE_TOPIC" "_relay.{group}.state" }}
{{- $_ := set $tmpl $name (include "relay.envOr" (dict "ctx" $ctx "name" $name "default" $def)) }}
{{- end }}
{{- $tiers := list }}
{{- range splitList "," (include "relay.envOr" (dict "ctx" $ctx "name" "RELAY_RETRY_TIERS" "default" "30s,5m")) }}
{{- if trim . }}{{ $tiers = append $tiers (trim .) }}{{ end }}
{{- end }}
{{- $elapsed := include "relay.durationMs" (dict "value" (include "relay.envOr" (dict "ctx" $ctx "name" "RELAY_RETRY_MAX_ELAPSED" "default" "1h")) "what" "RELAY_RETRY_MAX_ELAPSED") }}
{{- $plan := dict
  "state" (replace "{group}" $group (get $tmpl "RELAY_STATE_TOPIC"))
  "waitsInPlace" (eq (include "relay.envOr" (dict "ctx" $ctx "name" "RELAY_ORDERING" "default" "key")) "partition")
  "outputRetentionMs" (include "relay.durationMs" (dict "value" (include "relay.envOr" (dict "ctx" $ctx "name" "RELAY_OUTPUT_RETENTION" "default" "168h")) "what" "RELAY_OUTPUT_RETENTION"))
  "quarantineRetentionMs" (include "relay.durationMs" (dict "value" (include "relay.envOr" (dict "ctx" $ctx "name" "RELAY_QUARANTINE_RETENTION" "default" "720h")) "what" "RELAY_QUARANTINE_RETENTION"))
  "tierRetentionMs" (printf "%d" (max (mul 2 (int64 $elapsed)) 86400000))
  "sources" list }}
{{- range splitList "," (required "relay.sourceTopics is required" .Values.relay.sourceTopics) }}
{{- $src := trim . }}
{{- if $src }}
{{- $expand := dict }}
{{- range $name, $t := $tmpl }}
{{- $_ := set $expand $name (replace "{group}" $group (replace "{topic}" $src $t)) }}
{{- end }}
{{- $tierNames := list }}
{{- range $tiers }}
{{- $tierNames = append $tierNames (replace "{delay}" . (get $expand "RELAY_RETRY_TOPIC")) }}
{{- end }}
{{- $pattern := splitList "{delay}" (get $expand "RELAY_RETRY_TOPIC") }}
{{- $_ := set $plan "sources" (append $plan.sources (dict
  "source" $src
  "output" (replace "{topic}" $src (get $tmpl "RELAY_OUTPUT_TOPIC"))
  "quarantine" (get $expand "RELAY_QUARANTINE_TOPIC")
  "rejected" (get $expand "RELAY_REJECTED_TOPIC")
  "replay" (get $expand "RELAY_REPLAY_TOPIC")
  "tiers" $tierNames
  "tierPrefix" (ternary (first $pattern) "" (gt (len $pattern) 1)))) }}
{{- end }}
{{- end }}
{{- toJson $plan }}
{{- end -}}

{{/* A source's partition count, from sourcePartitions. Call with (dict
"ctx" $ "source" TOPIC "what" WHO-NEEDS-IT). */}}
{{- define "relay.sourcePartitions" -}}
{{- $n := index .ctx.Values.sourcePartitions .source -}}
{{- if not $n -}}
{{- fail (printf "%s needs sourcePartitions.%s: the partition count of source topic %q" .what .source .source) -}}
{{- end -}}
{{- $n -}}
{{- end -}}

{{/*
The ACLs of each of commands, as `relay topics acls` lists them: JSON
entries {resource, name, prefixed, operation}, each once. ids are the
instances' transactional ids (relay run's own, by name). Call with
(dict "ctx" $ "commands" LIST "ids" LIST).
*/}}
{{- define "relay.acls" -}}
{{- $plan := include "relay.topicPlan" .ctx | fromJson -}}
{{- $group := .ctx.Values.relay.groupId -}}
{{- $out := list -}}
{{- range $cmd := .commands }}
{{- $acls := list }}
{{- if eq $cmd "run" }}
{{- range $plan.sources }}
{{- $acls = concat $acls (list (list "Topic" .source false "Read") (list "Topic" .source false "DescribeConfigs")) }}
{{- $acls = concat $acls (list (list "Topic" .output false "Write") (list "Topic" .output false "DescribeConfigs")) }}
{{- if not $plan.waitsInPlace }}
{{- range .tiers }}{{ $acls = concat $acls (list (list "Topic" . false "Read") (list "Topic" . false "Write") (list "Topic" . false "DescribeConfigs")) }}{{ end }}
{{- end }}
{{- $acls = concat $acls (list (list "Topic" .quarantine false "Write") (list "Topic" .quarantine false "DescribeConfigs") (list "Topic" .rejected false "Write") (list "Topic" .rejected false "DescribeConfigs") (list "Topic" .replay false "Read") (list "Topic" .replay false "DescribeConfigs")) }}
{{- end }}
{{- $acls = concat $acls (list (list "Topic" $plan.state false "Read") (list "Topic" $plan.state false "Write") (list "Topic" $plan.state false "DescribeConfigs") (list "Group" $group true "Read")) }}
{{- range $.ids }}{{ $acls = append $acls (list "TransactionalId" . false "Write") }}{{ end }}
{{- $acls = append $acls (list "Cluster" "kafka-cluster" false "DescribeConfigs") }}
{{- else if eq $cmd "topics" }}
{{- range $plan.sources }}
{{- $acls = append $acls (list "Topic" .source false "Describe") }}
{{- range concat (list .output .quarantine .rejected .replay) .tiers }}
{{- $t := . }}
{{- range list "Create" "Alter" "AlterConfigs" "DescribeConfigs" }}{{ $acls = append $acls (list "Topic" $t false .) }}{{ end }}
{{- end }}
{{- end }}
{{- range list "Create" "Alter" "AlterConfigs" "DescribeConfigs" }}{{ $acls = append $acls (list "Topic" $plan.state false .) }}{{ end }}
{{- else if has $cmd (list "quarantine" "replay" "console") }}
{{- range $plan.sources }}
{{- $acls = concat $acls (list (list "Topic" .quarantine false "Read") (list "Topic" .quarantine false "DescribeConfigs")) }}
{{- if ne $cmd "quarantine" }}{{ $acls = append $acls (list "Topic" .replay false "Write") }}{{ end }}
{{- end }}
{{- $acls = concat $acls (list (list "Topic" $plan.state false "Read") (list "Topic" $plan.state false "Write") (list "Group" $group true "Read") (list "TransactionalId" (printf "%s." $group) true "Write")) }}
{{- else if eq $cmd "audit" }}
{{- range $plan.sources }}
{{- range list .source .output .quarantine .rejected .replay }}{{ $acls = append $acls (list "Topic" . false "Read") }}{{ end }}
{{- if .tierPrefix }}
{{- $acls = append $acls (list "Topic" .tierPrefix true "Read") }}
{{- else }}
{{- range .tiers }}{{ $acls = append $acls (list "Topic" . false "Read") }}{{ end }}
{{- end }}
{{- range list .source .output .quarantine .rejected }}{{ $acls = append $acls (list "Topic" . false "DescribeConfigs") }}{{ end }}
{{- end }}
{{- $acls = concat $acls (list (list "Topic" $plan.state false "Read") (list "Group" $group true "Describe") (list "Group" (printf "%s.audit" $group) false "Read")) }}
{{- else }}
{{- fail (printf "strimzi.user.commands: no command %q (run, topics, quarantine, replay, audit, console)" $cmd) }}
{{- end }}
{{- range $acls }}
{{- $acl := dict "resource" (index . 0) "name" (index . 1) "prefixed" (index . 2) "operation" (index . 3) }}
{{- if not (has $acl $out) }}{{ $out = append $out $acl }}{{ end }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end -}}

{{/* The instances' transactional ids: one per pod the StatefulSet may
run (keda.maxReplicaCount under KEDA, else replicas). */}}
{{- define "relay.transactionalIds" -}}
{{- $n := int .Values.replicas -}}
{{- if .Values.keda.enabled }}{{ $n = int .Values.keda.maxReplicaCount }}{{ end -}}
{{- $ids := list -}}
{{- range $i := until $n }}
{{- $ids = append $ids (printf "%s-%s-%d" (default $.Values.relay.groupId $.Values.relay.transactionalIdPrefix) (include "relay.fullname" $) $i) }}
{{- end }}
{{- toJson $ids -}}
{{- end -}}
