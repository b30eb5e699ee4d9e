// Builds dashboard-check (cmd/dashboard-check, kubetrain's own few lines) on the Grafana
// Foundation SDK (github.com/grafana/grafana-foundation-sdk/go, Apache-2.0): Grafana's
// dashboard schema as Go types with a strict JSON unmarshal and Validate. No Grafana
// server can run here (no package of it is available, and the licence of its Go module
// keeps it out), so dashboards are checked against the schema instead; v0.0.22 is the
// only version of the SDK's Go module on the Go module proxy.
module kubetrain.dev/cluster/tools/grafana

go 1.24.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
