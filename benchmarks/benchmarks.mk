# The operator's demo and benchmark (included by the top-level Makefile).
#   make demo    local control plane + the `local` stack + the operator as a local
#                process, driving one sample job per framework to Succeeded
#   make demo-kueue  the real Kueue beside it: two PyTorchJobs competing for one GPU
#                quota, the urgent one preempting the other, which resumes afterwards
#   make bench   benchmarks/operator_scale.py: 250 jobs (PyTorchJob, MPIJob, TrainJob) on 50 fake GPU nodes
#   make bench-gang  the same workload without, then with gang scheduling (Coscheduling), side by side
#   make bench-peers  benchmarks/peers.py: kubetrain against training-operator v1.9 (100
#                PyTorchJobs), mpi-operator v0.8 (50 MPIJobs) and upstream Trainer v2.3 with
#                JobSet v0.12, their CRDs and webhooks (100 TrainJobs of 4 nodes, the Kubeflow
#                SDK's body; kube-controller-manager's Job work counted on its own row),
#                interleaved, 3 runs each at default and at equal QPS/burst (about 45 minutes
#                on 2 cores; PEERS_ARGS to change, e.g. PEERS_ARGS="--kinds TrainJob")
#   make bench-scale  benchmarks/operator_sweep.py: 150, 1,000 and 5,000 jobs (operator_scale's
#                mix, about 4 pods each) on 700 fake GPU nodes of 32 GPUs (about 35 minutes on
#                2 cores; SCALE_ARGS to change)
#   make bench-synth  benchmarks/synth.py: synth CPU against kubectl kustomize
#   make bench-metrics  benchmarks/metrics_scrape.py: CPU of one /metrics scrape at 150 to
#                5,000 cached jobs (no control plane needed)
#   make bench-elastic  benchmarks/elastic_cluster.py: an elastic PyTorchJob's scales on the
#                control plane with metrics: HPA decision -> new Workers Running, -> surplus
#                gone, and kubectl scale -> Running (about 3 minutes; ELASTIC_ARGS to change)
#   make bench-node-recovery  benchmarks/node_recovery.py: a job's node NotReady, deleted or
#                unhealthy on kwok -> its gang Running on another node, p50 and max over 10
#                trials each (about 4 minutes; NODE_RECOVERY_ARGS to change)
#   make bench-drain-recovery  benchmarks/drain_recovery.py: kubectl drain of the real node
#                under real torch ranks -> new gang Pending, and uncordon -> training again,
#                p50 and max over 10 drains (about 15 minutes; DRAIN_ARGS to change, e.g.
#                DRAIN_ARGS="--trials 0 --evictions 10": a container kill and an eviction)
#   make bench-goodput  benchmarks/goodput.py: a 2-rank PyTorchJob (gloo, CPU) on the real node
#                under the real Kueue for about 10 minutes with seeded faults (rank 1 SIGKILLed,
#                rank 1 SIGSTOPped, its pod evicted, a Kueue preemption and readmission), run by
#                kubetrain, by training-operator v1.9 and (as a TrainJob) by Trainer v2.3 + JobSet:
#                goodput from rank 0's log, each fault -> training again, steps redone, finished
#                or not (about 45 minutes; GOODPUT_ARGS
#                to change, e.g. GOODPUT_ARGS="--seed 2 --systems kubetrain --minutes 6 --gap 60")
.PHONY: demo demo-kueue bench bench-gang bench-peers bench-scale bench-synth bench-metrics bench-progress bench-elastic bench-node-recovery bench-drain-recovery bench-goodput

demo: venv cluster-tools
	$(BIN)/python -m benchmarks.demo --workdir $(KUBETRAIN_CLUSTER_DIR)

demo-kueue: venv cluster-tools
	$(BIN)/python -m benchmarks.demo_kueue --workdir $(KUBETRAIN_CLUSTER_DIR)

bench: venv cluster-tools
	$(BIN)/python -m benchmarks.operator_scale

bench-gang: venv cluster-tools
	$(BIN)/python -m benchmarks.operator_scale --gang=both $(BENCH_GANG_ARGS)

PEERS_ARGS ?=
bench-peers: venv cluster-tools peer-tools
	$(BIN)/python -m benchmarks.peers $(PEERS_ARGS)

SCALE_ARGS ?=
bench-scale: venv cluster-tools
	$(BIN)/python -m benchmarks.operator_sweep $(SCALE_ARGS)

bench-synth: venv cluster-tools peer-tools
	$(BIN)/python -m benchmarks.synth

bench-metrics: venv
	$(BIN)/python -m benchmarks.metrics_scrape

ELASTIC_ARGS ?=
bench-elastic: venv cluster-tools
	$(BIN)/python -m benchmarks.elastic_cluster $(ELASTIC_ARGS)

NODE_RECOVERY_ARGS ?=
bench-node-recovery: venv cluster-tools
	$(BIN)/python -m benchmarks.node_recovery $(NODE_RECOVERY_ARGS)

DRAIN_ARGS ?=
bench-drain-recovery: venv cluster-tools node-packages images
	$(BIN)/python -m benchmarks.drain_recovery $(DRAIN_ARGS)

GOODPUT_ARGS ?=
bench-goodput: venv cluster-tools node-packages images peer-tools
	$(BIN)/python -m benchmarks.goodput $(GOODPUT_ARGS)

# A stack delivered by the real Argo CD from a local git repository (benchmarks/demo_argocd.py):
# the control plane with its real node, the images, Argo CD's controller and repo server.
# ARGOCD_ARGS: more options (--operator-replicas 2, --samples, --down, --stack NAME).
ARGOCD_ARGS ?=
demo-argocd: venv cluster-tools node-packages argocd-packages images
	$(BIN)/python -m benchmarks.demo_argocd --workdir $(KUBETRAIN_CLUSTER_DIR) $(ARGOCD_ARGS)

# benchmarks/progress_server.py: what the progress server costs (reports/s it writes,
# latency, operator and API server CPU per report) on a control plane of its own.
PROGRESS_ARGS ?=
bench-progress: venv cluster-tools
	$(BIN)/python -m benchmarks.progress_server $(PROGRESS_ARGS)
