{{/*
The pods that run one of relay's commands and stop: the audit CronJob's,
the helm test's and the topics Job's. They share the daemon's image,
environment, secrets and restricted security context, never its instance
identity (no RELAY_TRANSACTIONAL_ID: the commands derive their own).
*/}}

{{/* The pod-level settings. Call with (dict "ctx" $ "serviceAccount" NAME). */}}
{{- define "relay.opsPodSpec" -}}
restartPolicy: Never
serviceAccountName: {{ .serviceAccount }}
automountServiceAccountToken: false
{{- with include "relay.imagePullSecrets" .ctx }}
imagePullSecrets:
  {{- . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "relay.podSecurityContext" .ctx | nindent 2 }}
{{- end -}}

{{/* A command's container, less its name, command, args, resources and
mounts: the image, the daemon's environment (with the rules file unless
rules is false) and the restricted context. Call with (dict "ctx" $
"rules" BOOL). */}}
{{- define "relay.opsContainer" -}}
image: {{ include "relay.image" .ctx | quote }}
terminationMessagePolicy: {{ .ctx.Values.terminationMessagePolicy }}
imagePullPolicy: {{ .ctx.Values.image.pullPolicy }}
env:
  {{- include "relay.envWith" . | nindent 2 }}
{{- with .ctx.Values.envFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "relay.containerSecurityContext" .ctx | nindent 2 }}
{{- end -}}

{{/* Its mounts (a list's entries): /tmp, the rules (unless rules is
false), the secretFiles' Secrets. */}}
{{- define "relay.opsMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if and .rules (include "relay.rulesConfigMap" .ctx) }}
- name: rules
  mountPath: /etc/relay/rules
  readOnly: true
{{- end }}
{{- include "relay.secretMounts" .ctx }}
{{- end -}}

{{/* The volumes of those mounts (a list's entries). */}}
{{- define "relay.opsVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 16Mi
{{- if and .rules (include "relay.rulesConfigMap" .ctx) }}
- name: rules
  configMap:
    name: {{ include "relay.rulesConfigMap" .ctx }}
{{- end }}
{{- include "relay.secretVolumes" .ctx }}
{{- end -}}

{{/*
The labels of a hook's objects and pods (the helm test's, the topics
Job's): app.kubernetes.io/name is "<name>-<component>", so that neither
the headless Service, the PodDisruptionBudget nor the StatefulSet's
selector (which need the chart's name) takes the pod for one of relay's.
Call with (dict "ctx" $ "component" NAME).
*/}}
{{- define "relay.hookSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-%s" (include "relay.name" .ctx) .component | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "relay.hookLabels" -}}
{{ include "relay.hookSelectorLabels" . }}
app.kubernetes.io/version: {{ include "relay.tag" .ctx | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
