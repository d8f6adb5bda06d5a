# LeaderWorkerSet vllm-p5-48xlarge (leader), container vllm
vllm serve \
    /models/model \
    --host 0.0.0.0 \
    --port 8000 \
    --served-model-name llama-3.1-405b-instruct \
    --tensor-parallel-size 8 \
    --pipeline-parallel-size 2 \
    --max-model-len 131072 \
    --max-num-seqs 256 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --dtype auto \
    --enable-prefix-caching \
    --distributed-executor-backend mp \
    --nnodes 2 \
    --node-rank 0 \
    --master-addr '$(LWS_LEADER_ADDRESS)'

# LeaderWorkerSet vllm-p5-48xlarge (worker), container vllm
vllm serve \
    /models/model \
    --host 0.0.0.0 \
    --port 8000 \
    --served-model-name llama-3.1-405b-instruct \
    --tensor-parallel-size 8 \
    --pipeline-parallel-size 2 \
    --max-model-len 131072 \
    --max-num-seqs 256 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --dtype auto \
    --enable-prefix-caching \
    --distributed-executor-backend mp \
    --nnodes 2 \
    --node-rank '$(LWS_WORKER_INDEX)' \
    --master-addr '$(LWS_LEADER_ADDRESS)' \
    --headless
