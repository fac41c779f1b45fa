{{/*
The enabled operators (mysql, etcd, kafka), as a list.
*/}}
{{- define "statecraft.operators" -}}
{{- $enabled := list -}}
{{- range $op := list "mysql" "etcd" "kafka" -}}
{{- if (index $.Values $op).enabled -}}{{- $enabled = append $enabled $op -}}{{- end -}}
{{- end -}}
{{- join " " $enabled -}}
{{- end -}}

{{/*
The objects of a multi-document YAML file of the chart, as a list of dicts. The chart's
files/<operator>/ are links to what the repository ships (deploy/<operator>/), so the
chart installs exactly what `make manifests` generated and the tests checked.
*/}}
{{- define "statecraft.documents" -}}
{{- $docs := list -}}
{{- range $doc := regexSplit "(?m)^---\\s*$" . -1 -}}
{{- $o := fromYaml $doc -}}
{{- if $o -}}{{- $docs = append $docs $o -}}{{- end -}}
{{- end -}}
{{- toJson $docs -}}
{{- end -}}

{{/*
The labels every object of an operator carries (the selector of its pods, too).
*/}}
{{- define "statecraft.labels" -}}
app.kubernetes.io/name: statecraft-{{ . }}
app.kubernetes.io/part-of: statecraft
{{- end -}}

{{/*
The namespaces an operator manages resources in: watchNamespaces, each once, or the
release's namespace.
*/}}
{{- define "statecraft.watched" -}}
{{- $watched := uniq (compact .Values.watchNamespaces) -}}
{{- if not $watched }}{{ $watched = list .Release.Namespace }}{{ end -}}
{{- toJson $watched -}}
{{- end -}}

{{/*
Where an operator (.name) gets a Role, as a list of {name, namespace}: its own rights in the
release's namespace, then its rights over resources in each watched namespace.
*/}}
{{- define "statecraft.roles" -}}
{{- $roles := list (dict "name" (printf "%s-self" .name) "namespace" .Release.Namespace) -}}
{{- range $ns := include "statecraft.watched" . | fromJsonArray -}}
{{- $roles = append $roles (dict "name" $.name "namespace" $ns) -}}
{{- end -}}
{{- toJson $roles -}}
{{- end -}}
