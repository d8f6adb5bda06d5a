# Deployment vllm-g6-12xlarge, container vllm
vllm serve \
    s3://llmcap-scaleout-l4-weights-29779322/models/casperhansen/llama-3-8b-instruct-awq/ \
    --host 0.0.0.0 \
    --port 8000 \
    --served-model-name llama-3-8b-instruct \
    --tensor-parallel-size 2 \
    --pipeline-parallel-size 1 \
    --max-model-len 8192 \
    --max-num-seqs 163 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --dtype auto \
    --enable-prefix-caching \
    --quantization awq_marlin \
    --load-format runai_streamer
