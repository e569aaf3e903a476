{{/* The chart's name in names and labels: nameOverride replaces it. */}}
{{- define "relay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's name for every object, cut to Kubernetes' 63;
fullnameOverride replaces it whole. */}}
{{- define "relay.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "relay.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "relay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "relay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels: the selector's, the chart's, and
commonLabels (which cannot replace the chart's own). */}}
{{- define "relay.labels" -}}
{{- range $k, $v := .Values.commonLabels }}
{{- if has $k (list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "helm.sh/chart" "app.kubernetes.io/component") }}
{{- fail (printf "commonLabels: %s is the chart's own label" $k) }}
{{- end }}
{{- end }}
{{ include "relay.selectorLabels" . }}
app.kubernetes.io/version: {{ include "relay.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "relay.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/* The image: global.imageRegistry (a mirror), else image.registry,
before the repository, and the digest, when given, instead of the tag
(what runs cannot change under the tag). One of the two registries is
required: a bare repository would resolve to a public registry's library
namespace. */}}
{{- define "relay.image" -}}
{{- $registry := default .Values.image.registry (.Values.global).imageRegistry -}}
{{- if not $registry -}}
{{- fail "image.registry (or global.imageRegistry) is required: the registry you pushed relay's release image to (make release pushes it to RELAY_RELEASE_REPOSITORY); a bare image name would resolve to a public registry's library namespace" -}}
{{- end -}}
{{- $repo := printf "%s/%s" (trimSuffix "/" $registry) .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (include "relay.tag" .) -}}
{{- end -}}
{{- end -}}

{{- define "relay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "relay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The rules file's ConfigMap, when there is one. */}}
{{- define "relay.rulesConfigMap" -}}
{{- if .Values.relay.rules.existingConfigMap -}}
{{- .Values.relay.rules.existingConfigMap -}}
{{- else if .Values.relay.rules.inline -}}
{{- printf "%s-rules" (include "relay.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
The grace period the kubelet gives a stopping pod before its SIGKILL: the
shutdown bound, the span flush relay does after it (up to 5 s), and a
margin. A SIGKILL inside the bound races relay's final commit.
*/}}
{{- define "relay.gracePeriod" -}}
{{- $derived := add .Values.relay.shutdownTimeoutSeconds 5 .Values.terminationGraceMarginSeconds -}}
{{- if .Values.terminationGracePeriodSeconds -}}
{{- if lt (int .Values.terminationGracePeriodSeconds) (int $derived) -}}
{{- fail (printf "terminationGracePeriodSeconds %v is below the shutdown bound + span flush + margin (%v s): the kubelet's SIGKILL would race relay's final commit" .Values.terminationGracePeriodSeconds $derived) -}}
{{- end -}}
{{- .Values.terminationGracePeriodSeconds -}}
{{- else -}}
{{- $derived -}}
{{- end -}}
{{- end -}}

{{/* A librdkafka property as relay's variable: security.protocol → RELAY_KAFKA_SECURITY_PROTOCOL. */}}
{{- define "relay.kafkaVar" -}}
{{- if hasPrefix "RELAY_KAFKA_" . -}}
{{- . -}}
{{- else -}}
{{- printf "RELAY_KAFKA_%s" (. | upper | replace "." "_") -}}
{{- end -}}
{{- end -}}

{{/* The environment relay and its commands (audit, helm test) share. */}}
{{- define "relay.env" -}}
{{- include "relay.envWith" (dict "ctx" . "rules" true) -}}
{{- end -}}

{{/* relay.env, with the rules file or without it (rules false: the
topics Job, a pre-install hook that runs before the rules' ConfigMap
exists, and has no use for the rules). */}}
{{- define "relay.envWith" -}}
{{- $v := .ctx.Values -}}
- name: RELAY_SOURCE_TOPICS
  value: {{ required "relay.sourceTopics is required" $v.relay.sourceTopics | quote }}
- name: RELAY_GROUP_ID
  value: {{ $v.relay.groupId | quote }}
- name: RELAY_KAFKA_BOOTSTRAP_SERVERS
  value: {{ required "kafka.bootstrapServers is required" $v.kafka.bootstrapServers | quote }}
{{- range $name, $value := $v.kafka.properties }}
- name: {{ include "relay.kafkaVar" $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- if and .rules (include "relay.rulesConfigMap" .ctx) }}
- name: RELAY_RULES_FILE
  value: {{ printf "/etc/relay/rules/%s" $v.relay.rules.key | quote }}
{{- end }}
{{- range $name, $value := $v.relay.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- range $i, $f := $v.secretFiles }}
{{- range $var, $key := $f.keys }}
- name: {{ printf "%s_FILE" $var }}
  value: {{ printf "/var/run/secrets/relay/%s/%s" $f.secret $key | quote }}
{{- end }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The Secrets of secretFiles, each mounted whole (read-only) under
/var/run/secrets/relay/<secret>: a subPath mount would never see the
Secret change, and relay reads a rotated file without a restart.
*/}}
{{- define "relay.secretMounts" -}}
{{- range $i, $f := .Values.secretFiles }}
- name: {{ printf "secret-%d" $i }}
  mountPath: {{ printf "/var/run/secrets/relay/%s" $f.secret | quote }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "relay.secretVolumes" -}}
{{- range $i, $f := .Values.secretFiles }}
- name: {{ printf "secret-%d" $i }}
  secret:
    secretName: {{ $f.secret | quote }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* The restricted Pod Security Standard, for relay and its audit. */}}
{{/* "true" when the pod must leave its user and groups to the platform:
OpenShift's restricted-v2 SCC assigns a UID from the namespace's range
and refuses a pod that names another. global.compatibility.openshift.
adaptSecurityContext: auto (when the cluster serves OpenShift's security
API), force, or disabled. */}}
{{- define "relay.platformAssignsIDs" -}}
{{- $mode := default "auto" ((((.Values.global).compatibility).openshift).adaptSecurityContext) -}}
{{- if or (eq $mode "force") (and (eq $mode "auto") (.Capabilities.APIVersions.Has "security.openshift.io/v1")) -}}
true
{{- end -}}
{{- end -}}

{{- define "relay.podSecurityContext" -}}
runAsNonRoot: true
{{- if not (include "relay.platformAssignsIDs" .) }}
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "relay.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The console's environment: what it uses and nothing else. The daemon's
source, group, brokers and rules; kafka.properties without credentials
(password, secret, token, username, key), with the console's own over
them (its own principal); relay.env without the hook's variables and
without credentials; console.env; and console.secretFiles instead of the
daemon's secrets.
*/}}
{{- define "relay.consoleServiceAccountName" -}}
{{- if .Values.console.serviceAccount.create -}}
{{- default (printf "%s-console" (include "relay.fullname" .)) .Values.console.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.console.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "relay.consoleEnv" -}}
- name: RELAY_SOURCE_TOPICS
  value: {{ required "relay.sourceTopics is required" .Values.relay.sourceTopics | quote }}
- name: RELAY_GROUP_ID
  value: {{ .Values.relay.groupId | quote }}
- name: RELAY_KAFKA_BOOTSTRAP_SERVERS
  value: {{ required "kafka.bootstrapServers is required" .Values.kafka.bootstrapServers | quote }}
{{- $props := dict }}
{{- range $name, $value := .Values.kafka.properties }}
{{- if not (or (regexMatch "(?i)(password|secret|token|credential|private|username|jaas|oauthbearer|pem|ssl[._]key|[._]key$)" $name) (regexMatch "://[^/@]+:[^/@]*@" (toString $value))) }}
{{- $_ := set $props (include "relay.kafkaVar" $name) $value }}
{{- end }}
{{- end }}
{{- range $name, $value := .Values.console.kafka.properties }}
{{- $_ := set $props (include "relay.kafkaVar" $name) $value }}
{{- end }}
{{- range $name, $value := $props }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- if include "relay.rulesConfigMap" . }}
- name: RELAY_RULES_FILE
  value: {{ printf "/etc/relay/rules/%s" .Values.relay.rules.key | quote }}
{{- end }}
{{- $env := dict }}
{{- range $name, $value := .Values.relay.env }}
{{- if not (or (hasPrefix "RELAY_HOOK_" $name) (regexMatch "(PASSWORD|SECRET|TOKEN|CREDENTIAL|_KEY|_USER|_USERNAME)$" $name) (regexMatch "_(PASSWORD|SECRET|TOKEN|JAAS|OAUTHBEARER|PEM|SSL_KEY)_?" $name) (regexMatch "://[^/@]+:[^/@]*@" (toString $value))) }}
{{- $_ := set $env $name $value }}
{{- end }}
{{- end }}
{{- range $name, $value := .Values.console.env }}
{{- $_ := set $env $name $value }}
{{- end }}
{{- range $name, $value := $env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- range $i, $f := .Values.console.secretFiles }}
{{- range $var, $key := $f.keys }}
- name: {{ printf "%s_FILE" $var }}
  value: {{ printf "/var/run/secrets/relay/%s/%s" $f.secret $key | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "relay.consoleSecretMounts" -}}
{{- range $i, $f := .Values.console.secretFiles }}
- name: {{ printf "secret-%d" $i }}
  mountPath: {{ printf "/var/run/secrets/relay/%s" $f.secret | quote }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "relay.consoleSecretVolumes" -}}
{{- range $i, $f := .Values.console.secretFiles }}
- name: {{ printf "secret-%d" $i }}
  secret:
    secretName: {{ $f.secret | quote }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* The Host names the console answers to: the Ingress host and console.allowedHosts. */}}
{{- define "relay.consoleHosts" -}}
{{- $hosts := list }}
{{- if and .Values.console.ingress.enabled .Values.console.ingress.host }}
{{- $hosts = append $hosts .Values.console.ingress.host }}
{{- end }}
{{- $hosts = concat $hosts .Values.console.allowedHosts | uniq }}
{{- join "," $hosts -}}
{{- end -}}

{{/* An object's annotations: extra (the object's own values) and
commonAnnotations, the object's winning; nothing when both are empty.
Call with (dict "ctx" $ "extra" <map or nil>). */}}
{{- define "relay.annotations" -}}
{{- $a := dict -}}
{{- with .extra }}{{ $a = merge $a . }}{{ end -}}
{{- with .ctx.Values.commonAnnotations }}{{ $a = merge $a . }}{{ end -}}
{{- with $a }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
relay.sharedSettings: the settings every member of relay's group must
share (relay refuses to join a group whose members run other values), as
set in relay.env; unset ones are relay's defaults.
*/}}
{{- define "relay.sharedSettings" -}}
{{- $e := .Values.relay.env | default dict -}}
{{- printf "RELAY_ORDERING=%s RELAY_RETRY_TIERS=%s RELAY_RETRY_TOPIC=%s" (get $e "RELAY_ORDERING" | toString) (get $e "RELAY_RETRY_TIERS" | toString) (get $e "RELAY_RETRY_TOPIC" | toString) -}}
{{- end -}}

{{/*
relay.checkSharedSettings fails an upgrade that would change a shared
setting while pods of the release run: a rolling update would put both
values in one group, where the first new pod refuses to join. The
procedure scales to 0 first (RUNBOOK, "Upgrades: changing tiers and
ordering"). It needs the cluster (helm upgrade, helm install, and
--dry-run=server); helm template cannot look and checks nothing.
*/}}
{{- define "relay.checkSharedSettings" -}}
{{- $live := lookup "apps/v1" "StatefulSet" .Release.Namespace (include "relay.fullname" .) -}}
{{- if $live -}}
{{- $was := get ($live.metadata.annotations | default dict) "relay/shared-settings" | toString -}}
{{- if not $was -}}
{{- /* A StatefulSet of an older chart, without the annotation: its relay
container's environment, rendered from relay.env as now, says it. */ -}}
{{- $o := "" -}}
{{- $t := "" -}}
{{- $r := "" -}}
{{- range (($live.spec.template | default dict).spec | default dict).containers | default list -}}
{{- if eq .name "relay" -}}
{{- range .env | default list -}}
{{- if eq .name "RELAY_ORDERING" }}{{ $o = .value | default "" }}{{ end -}}
{{- if eq .name "RELAY_RETRY_TIERS" }}{{ $t = .value | default "" }}{{ end -}}
{{- if eq .name "RELAY_RETRY_TOPIC" }}{{ $r = .value | default "" }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $was = printf "RELAY_ORDERING=%s RELAY_RETRY_TIERS=%s RELAY_RETRY_TOPIC=%s" $o $t $r -}}
{{- end -}}
{{- $now := include "relay.sharedSettings" . -}}
{{- $running := max (($live.spec | default dict).replicas | default 0 | int) (($live.status | default dict).replicas | default 0 | int) -}}
{{- $wanted := .Values.replicas | int -}}
{{- if .Values.keda.enabled }}{{ $wanted = 1 }}{{ end -}}
{{- if and $was (ne $was $now) (gt $running 0) (gt $wanted 0) -}}
{{- fail (printf "relay.env changes a setting every instance of the group must share (%s → %s) while %d pods of %s run: a rolling update would put both in one group, and the first new pod would refuse to join it. Scale to 0 first and wait until the pods are gone (helm upgrade --reuse-values --set replicas=0, and under KEDA --set keda.enabled=false too), then upgrade with the new values (chart README, \"Changing tiers, ordering or the tier template\")" $was $now $running (include "relay.fullname" .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The pods' imagePullSecrets: global.imagePullSecrets, then
imagePullSecrets, as YAML (empty when there are none). */}}
{{- define "relay.imagePullSecrets" -}}
{{- $all := concat ((.Values.global).imagePullSecrets | default list) (.Values.imagePullSecrets | default list) -}}
{{- with $all -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}
