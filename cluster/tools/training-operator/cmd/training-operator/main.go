// Command training-operator runs Kubeflow training-operator v1.9.3's job controllers
// against a cluster, for kubetrain's peer benchmark.
//
// The reconcilers, the client defaults (QPS 20, burst 30, one worker per controller) and
// the flag names are upstream's; what differs from upstream's main is only what cannot
// run on the benchmark's machine: no validating webhook server and no certificate
// rotation (they need an in-cluster Service and bind every interface), and the metrics
// and health endpoints are off unless given an address (use 127.0.0.1).
package main

import (
	"flag"
	"os"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/kubeflow/training-operator/pkg/config"
	controllerv1 "github.com/kubeflow/training-operator/pkg/controller.v1"
	"github.com/kubeflow/training-operator/pkg/controller.v1/common"
)

func main() {
	var (
		metricsAddr       string
		probeAddr         string
		namespace         string
		schemes           controllerv1.EnabledSchemes
		controllerThreads int
		qps               int
		burst             int
	)
	// "0" turns controller-runtime's servers off; the benchmark reads nothing from them.
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "metrics endpoint address (0: off)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "0", "health endpoint address (0: off)")
	flag.StringVar(&namespace, "namespace", os.Getenv("KUBEFLOW_NAMESPACE"), "namespace to watch (empty: all)")
	flag.Var(&schemes, "enable-scheme", "job kind to reconcile, repeatable (default: every kind)")
	flag.IntVar(&controllerThreads, "controller-threads", 1, "workers per controller (upstream's default)")
	flag.IntVar(&qps, "kube-api-qps", 20, "client QPS (upstream's default)")
	flag.IntVar(&burst, "kube-api-burst", 30, "client burst (upstream's default)")
	// Upstream's own flags for the workers' init container (it waits for the master's DNS
	// name): a node that cannot pull alpine gives it an image it has (bench-goodput).
	flag.StringVar(&config.Config.PyTorchInitContainerImage, "pytorch-init-container-image",
		config.PyTorchInitContainerImageDefault, "image of the PyTorch workers' init container")
	flag.StringVar(&config.Config.PyTorchInitContainerTemplateFile, "pytorch-init-container-template-file",
		config.PyTorchInitContainerTemplateFileDefault, "template of the PyTorch workers' init container")
	config.Config.PyTorchInitContainerMaxTries = config.PyTorchInitContainerMaxTriesDefault
	config.Config.MPIKubectlDeliveryImage = config.MPIKubectlDeliveryImageDefault
	logOpts := zap.Options{Development: true, StacktraceLevel: zapcore.DPanicLevel}
	logOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logOpts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))

	var cacheOpts cache.Options
	if namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	cfg := ctrl.GetConfigOrDie()
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(qps), burst)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		Cache:                  cacheOpts,
	})
	if err != nil {
		log.Error(err, "unable to create the manager")
		os.Exit(1)
	}
	if schemes.Empty() {
		schemes.FillAll()
	}
	gang := common.GenNonGangSchedulerSetupFunc()
	for _, kind := range schemes {
		setup := controllerv1.SupportedSchemeReconciler[kind]
		if err := setup(mgr, gang, controllerThreads); err != nil {
			log.Error(err, "unable to create the controller", "kind", kind)
			os.Exit(1)
		}
	}
	log.Info("starting manager", "kinds", schemes, "qps", qps, "burst", burst)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
