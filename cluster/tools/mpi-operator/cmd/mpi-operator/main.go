// Command mpi-operator runs Kubeflow mpi-operator v0.8.0's MPIJob controller against a
// cluster, for kubetrain's peer benchmark.
//
// Flags and defaults are upstream's (QPS 5, burst 10, two workers, the same user agents
// on the same clients); the differences from upstream's main: no health server (upstream
// binds it on every interface), no leader election (a single replica), and the metrics
// endpoint binds to 127.0.0.1 when --monitoring-port is given.
package main

import (
	"flag"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeapiserver "k8s.io/apiserver/pkg/server"
	kubeinformers "k8s.io/client-go/informers"
	kubeclientset "k8s.io/client-go/kubernetes"
	clientgokubescheme "k8s.io/client-go/kubernetes/scheme"
	restclientset "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/cmd/mpi-operator/app/options"
	mpijobclientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	kubeflowscheme "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
	informers "github.com/kubeflow/mpi-operator/pkg/client/informers/externalversions"
	controllersv1 "github.com/kubeflow/mpi-operator/pkg/controller"
)

func main() {
	klog.InitFlags(nil)
	opt := options.NewServerOption()
	opt.AddFlags(flag.CommandLine)
	flag.Parse()
	if opt.MonitoringPort != 0 {
		go func() {
			mux := http.NewServeMux()
			mux.Handle("/metrics", promhttp.Handler())
			addr := fmt.Sprintf("127.0.0.1:%d", opt.MonitoringPort)
			klog.Error(http.ListenAndServe(addr, mux))
		}()
	}
	cfg, err := clientcmd.BuildConfigFromFlags(opt.MasterURL, opt.Kubeconfig)
	if err != nil {
		klog.Fatalf("cannot build a client config from --kubeConfig %q: %v", opt.Kubeconfig, err)
	}
	cfg.QPS = float32(opt.QPS)
	cfg.Burst = opt.Burst
	// The same clients and user agents as upstream's main.
	kubeClient := kubeclientset.NewForConfigOrDie(restclientset.AddUserAgent(cfg, "mpi-operator"))
	mpiJobClient := mpijobclientset.NewForConfigOrDie(cfg)
	if err := kubeflowscheme.AddToScheme(clientgokubescheme.Scheme); err != nil {
		klog.Fatalf("cannot register the MPIJob types for Events: %v", err)
	}

	stopCh := kubeapiserver.SetupSignalHandler()
	ctx, cancel := contextFrom(stopCh)
	defer cancel()
	var kubeOpts []kubeinformers.SharedInformerOption
	var kubeflowOpts []informers.SharedInformerOption
	if opt.Namespace != metav1.NamespaceAll {
		kubeOpts = append(kubeOpts, kubeinformers.WithNamespace(opt.Namespace))
		kubeflowOpts = append(kubeflowOpts, informers.WithNamespace(opt.Namespace))
	}
	kubeInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0, kubeOpts...)
	kubeflowInformers := informers.NewSharedInformerFactoryWithOptions(mpiJobClient, 0, kubeflowOpts...)
	controller, err := controllersv1.NewMPIJobController(
		ctx,
		kubeClient,
		mpiJobClient,
		nil,
		nil,
		kubeInformers.Core().V1().ConfigMaps(),
		kubeInformers.Core().V1().Secrets(),
		kubeInformers.Core().V1().Services(),
		kubeInformers.Batch().V1().Jobs(),
		kubeInformers.Core().V1().Pods(),
		kubeInformers.Scheduling().V1().PriorityClasses(),
		kubeflowInformers.Kubeflow().V2beta1().MPIJobs(),
		opt)
	if err != nil {
		klog.Fatalf("cannot create the MPIJob controller: %v", err)
	}
	go kubeInformers.Start(ctx.Done())
	go kubeflowInformers.Start(ctx.Done())
	klog.Infof("running the MPIJob controller: qps %d, burst %d, threadiness %d", opt.QPS, opt.Burst, opt.Threadiness)
	if err := controller.Run(opt.Threadiness, stopCh); err != nil {
		klog.Fatalf("controller stopped: %v", err)
	}
}
