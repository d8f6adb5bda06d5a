# Deployment vllm-p5en-48xlarge, container vllm
vllm serve \
    s3://llmcap-llama70b-weights-4847ab31/models/meta-llama/Llama-3.1-70B-Instruct/ \
    --host 0.0.0.0 \
    --port 8000 \
    --served-model-name llama-3.1-70b-instruct \
    --tensor-parallel-size 1 \
    --pipeline-parallel-size 1 \
    --max-model-len 131072 \
    --max-num-seqs 130 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --dtype auto \
    --enable-prefix-caching \
    --quantization fp8_per_tensor \
    --load-format runai_streamer
