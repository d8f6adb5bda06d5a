# Deployment vllm-g6e-xlarge, container vllm
vllm serve \
    /models/model \
    --host 0.0.0.0 \
    --port 8000 \
    --served-model-name llama-3.1-8b-instruct \
    --tensor-parallel-size 1 \
    --pipeline-parallel-size 1 \
    --max-model-len 131072 \
    --max-num-seqs 28 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --dtype auto \
    --enable-prefix-caching
