#!/usr/bin/env bash
# Builds one pinned chart tool from the Go module proxy into a versioned
# path (the Makefile's chart-tools target calls it once per tool; the
# result is cached in ./bin/chart until the version changes).
#
#   scripts/chart-tools.sh helm|kubeconform|helm-unittest VERSION OUT
#
# helm and kubeconform are `go install`ed at their version (each with its
# own go.sum, checked against the checksum database). helm-unittest's
# go.mod has replace directives, which `go install pkg@version` refuses, so
# it is built from its module source with its own go.sum.
set -euo pipefail

tool=$1 version=$2 out=$3
GO=${GO:-go}
mkdir -p "$(dirname "$out")"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

case $tool in
helm)
	# As helm's own Makefile does: the version it reports and the default
	# Kubernetes version of its client libraries (a source build otherwise
	# defaults to 1.20; the chart checks pass --kube-version anyway).
	k8s=$($GO mod download -json "helm.sh/helm/v3@$version" >/dev/null &&
		$GO list -m -f '{{.Version}}' -modfile="$($GO env GOMODCACHE)/cache/download/helm.sh/helm/v3/@v/$version.mod" k8s.io/client-go 2>/dev/null || true)
	minor=$(sed -n 's/^v0\.\([0-9]*\)\..*/\1/p' <<<"$k8s")
	ldflags="-X helm.sh/helm/v3/internal/version.version=$version"
	if [ -n "$minor" ]; then
		for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
			ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
		done
	fi
	GOBIN=$work $GO install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$version"
	mv "$work/helm" "$out"
	;;
kubeconform)
	GOBIN=$work $GO install -trimpath "github.com/yannh/kubeconform/cmd/kubeconform@$version"
	mv "$work/kubeconform" "$out"
	;;
helm-unittest)
	dir=$($GO mod download -json "github.com/helm-unittest/helm-unittest@$version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] || { echo "chart-tools: helm-unittest $version not found" >&2; exit 1; }
	cp -R "$dir" "$work/src"
	chmod -R u+w "$work/src"
	(cd "$work/src" && GOFLAGS="$GOFLAGS -mod=readonly" $GO build -trimpath -o "$work/helm-unittest" ./cmd/helm-unittest)
	mv "$work/helm-unittest" "$out"
	;;
*)
	echo "chart-tools: unknown tool $tool" >&2
	exit 2
	;;
esac
echo "chart-tools: $tool $version -> $out"
