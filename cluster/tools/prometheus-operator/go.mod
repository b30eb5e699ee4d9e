// The Prometheus Operator release whose CRDs (ServiceMonitor, PrometheusRule) the
// constructs' monitoring objects are validated against. Nothing is built from it: `make
// monitoring-crds` downloads the module into Go's module cache and cluster/tools.py
// (prometheus_operator_crds) reads the CRD files from example/prometheus-operator-crd/.
// v0.87.1 is the newest release of the module the Go module proxy serves here.
module kubetrain.dev/cluster/tools/prometheus-operator

go 1.24.0

require github.com/prometheus-operator/prometheus-operator v0.87.1
