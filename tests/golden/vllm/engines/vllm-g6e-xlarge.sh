# Deployment vllm-g6e-xlarge, container sglang
python3 -m sglang.launch_server \
    --model-path /models/model \
    --host 0.0.0.0 \
    --port 8000 \
    --api-key '$(SGLANG_API_KEY)' \
    --served-model-name llama-3-8b-instruct \
    --tp 1 \
    --context-length 8192 \
    --max-running-requests 161 \
    --chunked-prefill-size 8192 \
    --mem-fraction-static 0.88 \
    --kv-cache-dtype auto \
    --dtype auto \
    --schedule-policy fcfs \
    --enable-metrics \
    --quantization fp8
