# Deployment vllm-p5-48xlarge-chat, container vllm
vllm serve \
    /models/model \
    --host 0.0.0.0 \
    --port 8000 \
    --served-model-name llama-3.1-8b-instruct-chat \
    llama-3.1-8b-instruct \
    --tensor-parallel-size 8 \
    --pipeline-parallel-size 1 \
    --max-model-len 131072 \
    --max-num-seqs 147 \
    --max-num-batched-tokens 16384 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --dtype auto \
    --enable-prefix-caching
