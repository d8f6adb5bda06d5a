# Deployment vllm-p4de-24xlarge, container vllm
vllm serve \
    s3://llmcap-scaleup-a100-weights-a0e14704/models/meta-llama/Meta-Llama-3-8B-Instruct/ \
    --host 0.0.0.0 \
    --port 8000 \
    --served-model-name llama-3-8b-instruct \
    --tensor-parallel-size 1 \
    --pipeline-parallel-size 1 \
    --max-model-len 8192 \
    --max-num-seqs 256 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --dtype auto \
    --enable-prefix-caching \
    --load-format runai_streamer
