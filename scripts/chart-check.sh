#!/usr/bin/env bash
# Checks the Helm chart (make chart-check): lint, render every CI values
# file, validate the manifests against strict Kubernetes and CRD schemas,
# prove that bad input is refused, and run the helm-unittest suites.
#
# Tools and versions come from the Makefile (HELM, KUBECONFORM,
# HELM_UNITTEST, NATS_SERVER, KUBE_VERSION, SCHEMAS); see there.
set -euo pipefail

: "${HELM:?}" "${KUBECONFORM:?}" "${HELM_UNITTEST:?}" "${KUBE_VERSION:?}" "${SCHEMAS:?}" "${NATS_SERVER:?}"
chart=deploy/helm/toolwire
crds=tools/kubeschema/crds
out=${CHART_OUT:-bin/chart/rendered}
rm -rf "$out" && mkdir -p "$out"

kubeconform() {
	"$KUBECONFORM" -strict -summary -exit-on-error=false \
		-schema-location "$SCHEMAS/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
		-schema-location "$crds/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$@"
}

# expect_fail WHAT PATTERN CMD...: CMD must fail with PATTERN in its output.
expect_fail() {
	local what=$1 pattern=$2
	shift 2
	local got
	if got=$("$@" 2>&1); then
		echo "chart-check: $what: accepted, want refused" >&2
		exit 1
	fi
	if ! grep -qE -- "$pattern" <<<"$got"; then
		echo "chart-check: $what: refused, but not with /$pattern/:" >&2
		echo "$got" >&2
		exit 1
	fi
	echo "refused as expected: $what"
}

echo "--- tools/kubeschema (the schema generator's own tests)"
(cd tools/kubeschema && ${GO:-go} vet . && ${GO:-go} test -count=1 .)

echo "--- helm lint --strict, helm template, kubeconform -strict (Kubernetes $KUBE_VERSION)"
for values in "$chart"/ci/*-values.yaml; do
	name=$(basename "$values" -values.yaml)
	echo "== $name"
	"$HELM" lint --strict --quiet --kube-version "$KUBE_VERSION" -f "$values" "$chart"
	"$HELM" template "tw-$name" "$chart" --namespace toolwire --kube-version "$KUBE_VERSION" \
		-f "$values" >"$out/$name.yaml"
	# Hooks (the ensure Job) are rendered and checked too.
	kubeconform "$out/$name.yaml"
done

echo "--- the bundled NATS configuration passes nats-server -t (the go.mod's nats-server)"
for values in "$chart"/ci/*-values.yaml; do
	name=$(basename "$values" -values.yaml)
	for replicas in 1 3; do
		conf=$("$HELM" template "tw-$name" "$chart" --namespace toolwire --kube-version "$KUBE_VERSION" -f "$values" \
			--set nats.url= --set nats.bundled.enabled=true --set nats.bundled.replicas=$replicas \
			--set nats.monitoring.endpoint= --show-only templates/nats.yaml |
			awk '/^  nats.conf: \|/ { f = 1; next } f && !/^    / && !/^$/ { f = 0 } f { sub(/^    /, ""); print }')
		[ -n "$conf" ] || { echo "chart-check: no nats.conf rendered for $name" >&2; exit 1; }
		tmp=$(mktemp -d)
		sed -e "s|store_dir: /data|store_dir: $tmp/data|" -e "s|pid_file: .*|pid_file: $tmp/nats.pid|" <<<"$conf" >"$tmp/nats.conf"
		# The servers read the roles' passwords and the encryption key (as a
		# Secret provides them) from their environment: one password per
		# pool role too (each named in the rendered configuration).
		pools=()
		for v in $(grep -o 'TOOLWIRE_NATS_POOL_[A-Z0-9_]*_PASSWORD' "$tmp/nats.conf" | sort -u); do
			pools+=("$v=p")
		done
		env POD_NAME="tw-$name-nats-0" TOOLWIRE_NATS_DISPATCHER_PASSWORD=d TOOLWIRE_NATS_WORKER_PASSWORD=w \
			TOOLWIRE_NATS_OPERATOR_PASSWORD=o TOOLWIRE_JETSTREAM_KEY=chart-check-key-0123456789abcdef "${pools[@]}" \
			"$NATS_SERVER" -t -c "$tmp/nats.conf"
		rm -rf "$tmp"
	done
done

echo "--- bad input is refused"
good="$chart/ci/minimal-values.yaml"
expect_fail "an unknown values key (schema)" "additional properties 'replica' not allowed" \
	"$HELM" template t "$chart" --kube-version "$KUBE_VERSION" -f "$good" --set dispatcher.replica=2
expect_fail "a pool type that does not exist (schema)" "value must be one of" \
	"$HELM" template t "$chart" --kube-version "$KUBE_VERSION" -f "$good" \
	--set 'pools[0].name=x' --set 'pools[0].types[0]=shell'
expect_fail "a grace period the kubelet would cut short (template)" "must exceed preStopSeconds \+ graceSeconds" \
	"$HELM" template t "$chart" --kube-version "$KUBE_VERSION" -f "$good" \
	--set 'pools[0].name=x' --set 'pools[0].types[0]=native' --set 'pools[0].terminationGracePeriodSeconds=20'
expect_fail "a pool named as another pool's part (schema)" "pools/0/name" \
	"$HELM" template t "$chart" --kube-version "$KUBE_VERSION" -f "$good" \
	--set 'pools[0].name=x-native' --set 'pools[0].types[0]=native'
expect_fail "a pool named shadow (template)" "would reach the default shadow pools" \
	"$HELM" template t "$chart" --kube-version "$KUBE_VERSION" -f "$good" \
	--set 'pools[0].name=shadow' --set 'pools[0].types[0]=native'
# The schemas are strict: a misspelt field and a mistyped value fail.
sed 's/revisionHistoryLimit:/revisionHistoryLimt:/' "$out/minimal.yaml" >"$out/bad-field.yaml"
expect_fail "a misspelt Deployment field (kubeconform)" "additional properties 'revisionHistoryLimt' not allowed" \
	kubeconform "$out/bad-field.yaml"
sed -E 's/lagThreshold: "([0-9]+)"/lagThreshold: \1/' "$out/full.yaml" >"$out/bad-crd.yaml"
expect_fail "an unquoted ScaledObject trigger value (kubeconform, CRD schema)" "lagThreshold': got number, want string" \
	kubeconform "$out/bad-crd.yaml"
sed -E 's/^( +)for: 15m$/\1fro: 15m/' "$out/full.yaml" >"$out/bad-rule.yaml"
expect_fail "a misspelt PrometheusRule rule field (kubeconform, CRD schema)" "additional properties 'fro' not allowed" \
	kubeconform "$out/bad-rule.yaml"
expect_fail "a store threshold above 100% (schema)" "storeUsedPercent" \
	"$HELM" template t "$chart" --kube-version "$KUBE_VERSION" -f "$good" \
	--set metrics.prometheusRule.enabled=true --set metrics.prometheusRule.storeUsedPercent=120
rm -f "$out"/bad-*.yaml

echo "--- helm-unittest"
"$HELM_UNITTEST" --color=false "$chart"
