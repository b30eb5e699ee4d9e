// Builds the parts of Argo CD kubetrain runs from the pinned github.com/argoproj/argo-cd/v3
// release, for the GitOps tests and demo (cluster/argocd.py): cmd/argocd is a multicall
// binary of its application controller and repo server only (see its doc comment). The
// replace block is Argo CD's own (its go.mod at this tag), copied because replace
// directives apply only in the main module; kubetrain adds nothing to it.
module kubetrain.dev/cluster/tools/argocd

go 1.25.5

require (
	github.com/argoproj/argo-cd/v3 v3.2.11
	github.com/spf13/cobra v1.10.1
	k8s.io/klog/v2 v2.130.1
)

require (
	cloud.google.com/go/compute/metadata v0.7.0 // indirect
	dario.cat/mergo v1.0.2 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/azcore v1.19.1 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/azidentity v1.11.0 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/internal v1.11.2 // indirect
	github.com/Azure/go-ansiterm v0.0.0-20250102033503-faa5f7b0171c // indirect
	github.com/AzureAD/microsoft-authentication-library-for-go v1.4.2 // indirect
	github.com/MakeNowJust/heredoc v1.0.0 // indirect
	github.com/Masterminds/goutils v1.1.1 // indirect
	github.com/Masterminds/semver/v3 v3.4.0 // indirect
	github.com/Masterminds/sprig/v3 v3.3.0 // indirect
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/ProtonMail/go-crypto v1.1.6 // indirect
	github.com/TomOnTime/utfutil v1.0.0 // indirect
	github.com/argoproj/gitops-engine v0.7.1-0.20251217140045-5baed5604d2d // indirect
	github.com/argoproj/pkg v0.13.6 // indirect
	github.com/argoproj/pkg/v2 v2.0.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/blang/semver/v4 v4.0.0 // indirect
	github.com/bmatcuk/doublestar/v4 v4.9.1 // indirect
	github.com/bombsimon/logrusr/v4 v4.1.0 // indirect
	github.com/bradleyfalzon/ghinstallation/v2 v2.16.0 // indirect
	github.com/casbin/casbin/v2 v2.123.0 // indirect
	github.com/casbin/govaluate v1.10.0 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/chai2010/gettext-go v1.0.3 // indirect
	github.com/cloudflare/circl v1.6.1 // indirect
	github.com/coreos/go-oidc/v3 v3.14.1 // indirect
	github.com/cyphar/filepath-securejoin v0.4.1 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/distribution/reference v0.6.0 // indirect
	github.com/dlclark/regexp2 v1.11.5 // indirect
	github.com/emicklei/go-restful/v3 v3.12.2 // indirect
	github.com/emirpasic/gods v1.18.1 // indirect
	github.com/evanphx/json-patch v5.9.11+incompatible // indirect
	github.com/evanphx/json-patch/v5 v5.9.11 // indirect
	github.com/exponent-io/jsonpath v0.0.0-20210407135951-1de76d718b3f // indirect
	github.com/fatih/camelcase v1.0.0 // indirect
	github.com/felixge/httpsnoop v1.0.4 // indirect
	github.com/fsnotify/fsnotify v1.9.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.0 // indirect
	github.com/go-errors/errors v1.5.1 // indirect
	github.com/go-git/gcfg v1.5.1-0.20230307220236-3a3c6141e376 // indirect
	github.com/go-git/go-billy/v5 v5.6.2 // indirect
	github.com/go-git/go-git/v5 v5.14.0 // indirect
	github.com/go-jose/go-jose/v4 v4.1.2 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-openapi/jsonpointer v0.21.1 // indirect
	github.com/go-openapi/jsonreference v0.21.0 // indirect
	github.com/go-openapi/swag v0.23.1 // indirect
	github.com/go-redis/cache/v9 v9.0.0 // indirect
	github.com/gobwas/glob v0.2.3 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang-jwt/jwt/v4 v4.5.2 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.0 // indirect
	github.com/golang/groupcache v0.0.0-20241129210726-2c02b8208cf8 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/google/gnostic-models v0.7.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/go-github/v69 v69.2.0 // indirect
	github.com/google/go-github/v72 v72.0.0 // indirect
	github.com/google/go-jsonnet v0.21.0 // indirect
	github.com/google/go-querystring v1.1.0 // indirect
	github.com/google/shlex v0.0.0-20191202100458-e7afc7fbc510 // indirect
	github.com/google/uuid v1.6.1-0.20241114170450-2d3c2a9cc518 // indirect
	github.com/gorilla/websocket v1.5.4-0.20250319132907-e064f32e3674 // indirect
	github.com/gregjones/httpcache v0.0.0-20190611155906-901d90724c79 // indirect
	github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus v1.1.0 // indirect
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.2 // indirect
	github.com/grpc-ecosystem/grpc-gateway v1.16.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.27.2 // indirect
	github.com/huandu/xstrings v1.5.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/itchyny/gojq v0.12.17 // indirect
	github.com/itchyny/timefmt-go v0.1.6 // indirect
	github.com/jbenet/go-context v0.0.0-20150711004518-d14ea06fba99 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/josharian/intern v1.0.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/kballard/go-shellquote v0.0.0-20180428030007-95032a82bc51 // indirect
	github.com/kevinburke/ssh_config v1.2.0 // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/liggitt/tabwriter v0.0.0-20181228230101-89fcab3d43de // indirect
	github.com/mailru/easyjson v0.9.0 // indirect
	github.com/minio/blake2b-simd v0.0.0-20160723061019-3f5f724cb5b1 // indirect
	github.com/mitchellh/copystructure v1.2.0 // indirect
	github.com/mitchellh/go-wordwrap v1.0.1 // indirect
	github.com/mitchellh/reflectwalk v1.0.2 // indirect
	github.com/moby/spdystream v0.5.0 // indirect
	github.com/moby/term v0.5.2 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/monochromegane/go-gitignore v0.0.0-20200626010858-205db1a8cc00 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/mxk/go-flowrate v0.0.0-20140419014527-cca7078d478f // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/patrickmn/go-cache v2.1.1-0.20191004192108-46f407853014+incompatible // indirect
	github.com/peterbourgon/diskv v2.0.1+incompatible // indirect
	github.com/pjbgf/sha1cd v0.3.2 // indirect
	github.com/pkg/browser v0.0.0-20240102092130-5ac0b6a4141c // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	github.com/r3labs/diff/v3 v3.0.2 // indirect
	github.com/redis/go-redis/v9 v9.8.0 // indirect
	github.com/robfig/cron/v3 v3.0.2-0.20210106135023-bc59245fe10e // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/sergi/go-diff v1.3.2-0.20230802210424-5b0b94c5c0d3 // indirect
	github.com/shopspring/decimal v1.4.0 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/skeema/knownhosts v1.3.1 // indirect
	github.com/spf13/cast v1.7.1 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	github.com/vmihailenco/go-tinylfu v0.2.2 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	github.com/xanzy/ssh-agent v0.3.3 // indirect
	github.com/xlab/treeprint v1.2.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.opentelemetry.io/auto/sdk v1.1.0 // indirect
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.63.0 // indirect
	go.opentelemetry.io/otel v1.38.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.38.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc v1.38.0 // indirect
	go.opentelemetry.io/otel/metric v1.38.0 // indirect
	go.opentelemetry.io/otel/sdk v1.38.0 // indirect
	go.opentelemetry.io/otel/trace v1.38.0 // indirect
	go.opentelemetry.io/proto/otlp v1.7.1 // indirect
	go.uber.org/mock v0.6.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
	golang.org/x/crypto v0.46.0 // indirect
	golang.org/x/net v0.47.0 // indirect
	golang.org/x/oauth2 v0.31.0 // indirect
	golang.org/x/sync v0.19.0 // indirect
	golang.org/x/sys v0.39.0 // indirect
	golang.org/x/term v0.38.0 // indirect
	golang.org/x/text v0.32.0 // indirect
	golang.org/x/time v0.13.0 // indirect
	google.golang.org/genproto v0.0.0-20240213162025-012b6fc9bca9 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20250825161204-c5933d9347a5 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250825161204-c5933d9347a5 // indirect
	google.golang.org/grpc v1.75.1 // indirect
	google.golang.org/protobuf v1.36.9 // indirect
	gopkg.in/evanphx/json-patch.v4 v4.12.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/warnings.v0 v0.1.2 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	k8s.io/api v0.34.4 // indirect
	k8s.io/apiextensions-apiserver v0.34.0 // indirect
	k8s.io/apimachinery v0.34.4 // indirect
	k8s.io/apiserver v0.34.4 // indirect
	k8s.io/cli-runtime v0.34.4 // indirect
	k8s.io/client-go v0.34.4 // indirect
	k8s.io/component-base v0.34.4 // indirect
	k8s.io/component-helpers v0.34.4 // indirect
	k8s.io/controller-manager v0.34.0 // indirect
	k8s.io/kube-aggregator v0.34.0 // indirect
	k8s.io/kube-openapi v0.0.0-20250710124328-f3f2b991d03b // indirect
	k8s.io/kubectl v0.34.0 // indirect
	k8s.io/kubernetes v1.34.2 // indirect
	k8s.io/utils v0.0.0-20250604170112-4c0f3b243397 // indirect
	layeh.com/gopher-json v0.0.0-20190114024228-97fed8db8427 // indirect
	oras.land/oras-go/v2 v2.6.0 // indirect
	sigs.k8s.io/controller-runtime v0.21.0 // indirect
	sigs.k8s.io/json v0.0.0-20241014173422-cfa47c3a1cc8 // indirect
	sigs.k8s.io/kustomize/api v0.20.1 // indirect
	sigs.k8s.io/kustomize/kyaml v0.20.1 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.3.1-0.20251003215857-446d8398e19c // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

replace (
	github.com/golang/protobuf => github.com/golang/protobuf v1.5.4
	github.com/grpc-ecosystem/grpc-gateway => github.com/grpc-ecosystem/grpc-gateway v1.16.0
	golang.org/x/tools => golang.org/x/tools v0.35.0

	// Avoid CVE-2022-3064
	gopkg.in/yaml.v2 => gopkg.in/yaml.v2 v2.4.0

	// Avoid CVE-2022-28948
	gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1

	k8s.io/api => k8s.io/api v0.34.4
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.34.4
	k8s.io/apimachinery => k8s.io/apimachinery v0.34.4
	k8s.io/apiserver => k8s.io/apiserver v0.34.4
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.34.4
	k8s.io/client-go => k8s.io/client-go v0.34.4
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.34.0
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.34.0
	k8s.io/code-generator => k8s.io/code-generator v0.34.0
	k8s.io/component-base => k8s.io/component-base v0.34.4
	k8s.io/component-helpers => k8s.io/component-helpers v0.34.4
	k8s.io/controller-manager => k8s.io/controller-manager v0.34.4
	k8s.io/cri-api => k8s.io/cri-api v0.34.0
	k8s.io/cri-client => k8s.io/cri-client v0.34.0
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.34.0
	k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.34.0
	k8s.io/endpointslice => k8s.io/endpointslice v0.34.0
	k8s.io/externaljwt => k8s.io/externaljwt v0.34.0
	k8s.io/kms => k8s.io/kms v0.34.0
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.34.4
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.34.0
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.34.0
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.34.0
	k8s.io/kubectl => k8s.io/kubectl v0.34.4
	k8s.io/kubelet => k8s.io/kubelet v0.34.0
	k8s.io/legacy-cloud-providers => k8s.io/legacy-cloud-providers v0.34.0
	k8s.io/metrics => k8s.io/metrics v0.34.0
	k8s.io/mount-utils => k8s.io/mount-utils v0.34.0
	k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.34.0
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.34.0
	k8s.io/sample-cli-plugin => k8s.io/sample-cli-plugin v0.34.0
	k8s.io/sample-controller => k8s.io/sample-controller v0.34.0
)

// Aligned with the control plane's module (cluster/tools/kubernetes) by
// `python -m cluster.go_align`: the packages both build are compiled once, for both,
// by Go's build cache.
replace (
	github.com/Azure/go-ansiterm => github.com/Azure/go-ansiterm v0.0.0-20230124172434-306776ec8161
	github.com/chai2010/gettext-go => github.com/chai2010/gettext-go v1.0.2
	github.com/davecgh/go-spew => github.com/davecgh/go-spew v1.1.1
	github.com/go-errors/errors => github.com/go-errors/errors v1.4.2
	github.com/go-logr/logr => github.com/go-logr/logr v1.4.2
	github.com/go-openapi/jsonpointer => github.com/go-openapi/jsonpointer v0.21.0
	github.com/go-openapi/jsonreference => github.com/go-openapi/jsonreference v0.20.2
	github.com/go-openapi/swag => github.com/go-openapi/swag v0.23.0
	github.com/golang-jwt/jwt/v5 => github.com/golang-jwt/jwt/v5 v5.2.2
	github.com/golang/groupcache => github.com/golang/groupcache v0.0.0-20210331224755-41bb18bfe9da
	github.com/google/uuid => github.com/google/uuid v1.6.0
	github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus => github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus v1.0.1
	github.com/grpc-ecosystem/go-grpc-middleware/v2 => github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.0
	github.com/grpc-ecosystem/grpc-gateway/v2 => github.com/grpc-ecosystem/grpc-gateway/v2 v2.26.3
	github.com/mailru/easyjson => github.com/mailru/easyjson v0.7.7
	github.com/moby/term => github.com/moby/term v0.5.0
	github.com/pmezard/go-difflib => github.com/pmezard/go-difflib v1.0.0
	github.com/prometheus/client_golang => github.com/prometheus/client_golang v1.22.0
	github.com/prometheus/client_model => github.com/prometheus/client_model v0.6.1
	github.com/prometheus/common => github.com/prometheus/common v0.62.0
	github.com/prometheus/procfs => github.com/prometheus/procfs v0.15.1
	github.com/robfig/cron/v3 => github.com/robfig/cron/v3 v3.0.1
	github.com/spf13/cobra => github.com/spf13/cobra v1.9.1
	github.com/spf13/pflag => github.com/spf13/pflag v1.0.6
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc => go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.60.0
	go.opentelemetry.io/otel => go.opentelemetry.io/otel v1.35.0
	go.opentelemetry.io/otel/exporters/otlp/otlptrace => go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.34.0
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc => go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc v1.34.0
	go.opentelemetry.io/otel/metric => go.opentelemetry.io/otel/metric v1.35.0
	go.opentelemetry.io/otel/sdk => go.opentelemetry.io/otel/sdk v1.34.0
	go.opentelemetry.io/otel/trace => go.opentelemetry.io/otel/trace v1.35.0
	go.opentelemetry.io/proto/otlp => go.opentelemetry.io/proto/otlp v1.5.0
	golang.org/x/crypto => golang.org/x/crypto v0.36.0
	golang.org/x/net => golang.org/x/net v0.38.0
	golang.org/x/oauth2 => golang.org/x/oauth2 v0.27.0
	golang.org/x/sync => golang.org/x/sync v0.12.0
	golang.org/x/sys => golang.org/x/sys v0.31.0
	golang.org/x/term => golang.org/x/term v0.30.0
	golang.org/x/text => golang.org/x/text v0.23.0
	golang.org/x/time => golang.org/x/time v0.9.0
	google.golang.org/grpc => google.golang.org/grpc v1.72.1
	google.golang.org/protobuf => google.golang.org/protobuf v1.36.5
	k8s.io/kubernetes => k8s.io/kubernetes v1.34.4
	sigs.k8s.io/structured-merge-diff/v6 => sigs.k8s.io/structured-merge-diff/v6 v6.3.0
)
