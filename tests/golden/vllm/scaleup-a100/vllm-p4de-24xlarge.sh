# Deployment vllm-p4de-24xlarge, container vllm
vllm serve \
    /models/model \
    --host 0.0.0.0 \
    --port 8000 \
    --served-model-name llama-3-8b-instruct \
    --tensor-parallel-size 8 \
    --pipeline-parallel-size 1 \
    --max-model-len 8192 \
    --max-num-seqs 256 \
    --max-num-batched-tokens 512 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --dtype auto \
    --enable-prefix-caching
