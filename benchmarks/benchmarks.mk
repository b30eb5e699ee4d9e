# The operator's demo and benchmark (included by the top-level Makefile).
#   make demo    local control plane + the `local` stack + the operator as a local
#                process, driving one sample job per framework to Succeeded
#   make demo-kueue  the real Kueue beside it: two PyTorchJobs competing for one GPU
#                quota, the urgent one preempting the other, which resumes afterwards
#   make bench   benchmarks/operator_scale.py: 250 jobs (PyTorchJob, MPIJob, TrainJob) on 50 fake GPU nodes
#   make bench-gang  the same workload without, then with gang scheduling (Coscheduling)
.PHONY: demo demo-kueue bench bench-gang

demo: venv cluster-tools
	$(BIN)/python -m benchmarks.demo --workdir $(KUBETRAIN_CLUSTER_DIR)

demo-kueue: venv cluster-tools
	$(BIN)/python -m benchmarks.demo_kueue --workdir $(KUBETRAIN_CLUSTER_DIR)

bench: venv cluster-tools
	$(BIN)/python -m benchmarks.operator_scale

bench-gang: venv cluster-tools
	$(BIN)/python -m benchmarks.operator_scale $(BENCH_GANG_ARGS)
	$(BIN)/python -m benchmarks.operator_scale --gang $(BENCH_GANG_ARGS)
