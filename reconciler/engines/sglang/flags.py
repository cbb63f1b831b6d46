"""Models: SGLang's command-line flags by version — data only.

Read from each release's own parser (`ServerArgs.add_cli_args`, run from the PyPI wheel of
that version, 2026-11). A version lists the flags added and removed since the one before,
so a diff between releases reads as one. `--help` is left out.
"""

from __future__ import annotations

# (version, added, removed); the first entry lists every flag of that version.
SGLANG_FLAG_HISTORY: tuple[tuple[str, str, str], ...] = (
    (
        "0.5.8",
        """
        --abort-on-priority-when-disabled --admin-api-key --allow-auto-truncate --api-key
        --attention-backend --base-gpu-id --bucket-e2e-request-latency
        --bucket-inter-token-latency --bucket-time-to-first-token --chat-template
        --checkpoint-engine-wait-weights-before-ready --chunked-prefill-size
        --collect-tokens-histogram --completion-template --config
        --constrained-json-disable-any-whitespace --constrained-json-whitespace-pattern
        --context-length --cpu-offload-gb --crash-dump-folder --cuda-graph-bs
        --cuda-graph-max-bs --custom-sigquit-handler --custom-weight-loader
        --data-parallel-size --debug-tensor-dump-inject --debug-tensor-dump-input-file
        --debug-tensor-dump-layers --debug-tensor-dump-output-folder
        --decode-attention-backend --decode-log-interval --decrypted-config-file
        --decrypted-draft-config-file --deepep-config --deepep-mode
        --delete-ckpt-after-loading --device --disable-chunked-prefix-cache
        --disable-cuda-graph --disable-cuda-graph-padding --disable-custom-all-reduce
        --disable-fast-image-processor --disable-flashinfer-autotune
        --disable-flashinfer-cutlass-moe-fp4-allgather --disable-hicache-numa-detect
        --disable-hybrid-swa-memory --disable-outlines-disk-cache --disable-overlap-schedule
        --disable-radix-cache --disable-shared-experts-fusion
        --disable-tokenizer-batch-decode --disaggregation-bootstrap-port
        --disaggregation-decode-dp --disaggregation-decode-enable-fake-auto
        --disaggregation-decode-enable-offload-kvcache
        --disaggregation-decode-polling-interval --disaggregation-decode-tp
        --disaggregation-ib-device --disaggregation-mode --disaggregation-prefill-pp
        --disaggregation-transfer-backend --dist-init-addr --dist-timeout --dllm-algorithm
        --dllm-algorithm-config --download-dir --dp-size --ds-channel-config-path
        --ds-heavy-channel-num --ds-heavy-channel-type --ds-heavy-token-num
        --ds-sparse-decode-threshold --dtype --dynamic-batch-tokenizer-batch-size
        --dynamic-batch-tokenizer-batch-timeout --elastic-ep-backend
        --enable-attn-tp-input-scattered --enable-broadcast-mm-inputs-process
        --enable-cache-report --enable-cudagraph-gc --enable-custom-logit-processor
        --enable-deterministic-inference --enable-double-sparsity --enable-dp-attention
        --enable-dp-lm-head --enable-draft-weights-cpu-backup
        --enable-dynamic-batch-tokenizer --enable-dynamic-chunking --enable-eplb
        --enable-expert-distribution-metrics --enable-flashinfer-allreduce-fusion
        --enable-fp32-lm-head --enable-fused-qk-norm-rope --enable-hierarchical-cache
        --enable-layerwise-nvtx-marker --enable-lmcache --enable-lora
        --enable-lora-overlap-loading --enable-memory-saver --enable-metrics
        --enable-metrics-for-all-schedulers --enable-mixed-chunk --enable-mscclpp
        --enable-multi-layer-eagle --enable-multimodal --enable-nan-detection
        --enable-nccl-nvls --enable-nsa-prefill-context-parallel --enable-p2p-check
        --enable-pdmux --enable-piecewise-cuda-graph
        --enable-precise-embedding-interpolation --enable-prefill-delayer
        --enable-prefix-mm-cache --enable-priority-scheduling --enable-profile-cuda-graph
        --enable-request-time-stats-logging --enable-return-hidden-states
        --enable-return-routed-experts --enable-single-batch-overlap --enable-symm-mem
        --enable-tokenizer-batch-encode --enable-torch-compile
        --enable-torch-compile-debug-mode --enable-torch-symm-mem --enable-trace
        --enable-two-batch-overlap --enable-weights-cpu-backup --encoder-only
        --encoder-transfer-backend --encoder-urls --ep --ep-dispatch-algorithm
        --ep-num-redundant-experts --ep-size --eplb-algorithm
        --eplb-min-rebalancing-utilization-threshold --eplb-rebalance-layers-per-chunk
        --eplb-rebalance-num-iterations --expert-distribution-recorder-buffer-size
        --expert-distribution-recorder-mode --expert-parallel-size --export-metrics-to-file
        --export-metrics-to-file-dir --fastapi-root-path --file-storage-path
        --flashinfer-mla-disable-ragged --flashinfer-mxfp4-moe-precision --forward-hooks
        --fp4-gemm-backend --fp8-gemm-backend --gc-warning-threshold-secs
        --generation-tokens-buckets --gpu-id-step --grammar-backend --grpc-mode --help
        --hf-chat-template-name --hicache-io-backend --hicache-mem-layout --hicache-ratio
        --hicache-size --hicache-storage-backend --hicache-storage-backend-extra-config
        --hicache-storage-prefetch-policy --hicache-write-policy
        --hierarchical-sparse-attention-extra-config --host --hybrid-kvcache-ratio
        --init-expert-location --is-embedding --json-model-override-args
        --keep-mm-feature-on-device --kt-cpuinfer --kt-max-deferred-experts-per-token
        --kt-method --kt-num-gpu-experts --kt-threadpool-count --kt-weight-path
        --kv-cache-dtype --kv-events-config --language-only --limit-mm-data-per-request
        --load-balance-method --load-format --log-level --log-level-http --log-requests
        --log-requests-format --log-requests-level --log-requests-target --lora-backend
        --lora-eviction-policy --lora-paths --lora-target-modules --mamba-full-memory-ratio
        --mamba-scheduler-strategy --mamba-ssm-dtype --mamba-track-interval
        --max-loaded-loras --max-lora-chunk-size --max-lora-rank --max-loras-per-batch
        --max-mamba-cache-size --max-prefill-tokens --max-queued-requests
        --max-running-requests --max-total-tokens --mem-fraction-static
        --mm-attention-backend --mm-enable-dp-encoder --mm-max-concurrent-calls
        --mm-per-request-timeout --mm-process-config --model --model-checksum --model-impl
        --model-loader-extra-config --model-path --modelopt-checkpoint-restore-path
        --modelopt-checkpoint-save-path --modelopt-export-path --modelopt-quant
        --moe-a2a-backend --moe-dense-tp-size --moe-runner-backend --mooncake-ib-device
        --multi-item-scoring-delimiter --nccl-init-addr --nccl-port --nnodes --node-rank
        --nsa-decode-backend --nsa-prefill-backend --nsa-prefill-cp-mode
        --num-continuous-decode-steps --num-reserved-decode-tokens --numa-node
        --offload-group-size --offload-mode --offload-num-in-group --offload-prefetch-step
        --otlp-traces-endpoint --page-size --pdmux-config-path
        --piecewise-cuda-graph-compiler --piecewise-cuda-graph-max-tokens
        --piecewise-cuda-graph-tokens --pipeline-parallel-size --port --pp-async-batch-depth
        --pp-max-micro-batch-size --pp-size --preferred-sampling-params
        --prefill-attention-backend --prefill-delayer-forward-passes-buckets
        --prefill-delayer-max-delay-passes --prefill-delayer-token-usage-low-watermark
        --prefill-delayer-wait-seconds-buckets --prefill-max-requests
        --prefill-round-robin-balance --priority-scheduling-preemption-threshold
        --prompt-tokens-buckets --quantization --quantization-param-path
        --quantize-and-serve --radix-eviction-policy --random-seed --reasoning-parser
        --remote-instance-weight-loader-backend
        --remote-instance-weight-loader-seed-instance-ip
        --remote-instance-weight-loader-seed-instance-service-port
        --remote-instance-weight-loader-send-weights-group-ports
        --remote-instance-weight-loader-start-seed-via-transfer-engine --revision
        --rl-on-policy-target --rl-quant-profile --sampling-backend --sampling-defaults
        --schedule-conservativeness --schedule-low-priority-values-first --schedule-policy
        --scheduler-recv-interval --served-model-name --show-time-cost --skip-server-warmup
        --skip-tokenizer-init --sleep-on-idle --sm-group-num --soft-watchdog-timeout
        --speculative-accept-threshold-acc --speculative-accept-threshold-single
        --speculative-algorithm --speculative-attention-mode
        --speculative-draft-attention-backend --speculative-draft-load-format
        --speculative-draft-model --speculative-draft-model-path
        --speculative-draft-model-quantization --speculative-draft-model-revision
        --speculative-eagle-topk --speculative-moe-a2a-backend
        --speculative-moe-runner-backend --speculative-ngram-branch-length
        --speculative-ngram-capacity --speculative-ngram-match-type
        --speculative-ngram-max-bfs-breadth --speculative-ngram-max-match-window-size
        --speculative-ngram-min-bfs-breadth --speculative-ngram-min-match-window-size
        --speculative-num-draft-tokens --speculative-num-steps --speculative-token-map
        --stream-interval --stream-output --swa-full-tokens-ratio
        --tbo-token-distribution-threshold --tensor-parallel-size
        --tokenizer-metrics-allowed-custom-labels --tokenizer-metrics-custom-labels-header
        --tokenizer-mode --tokenizer-path --tokenizer-worker-num --tool-call-parser
        --tool-server --torch-compile-max-bs --torchao-config --tp-size
        --triton-attention-num-kv-splits --triton-attention-reduce-in-fp32
        --triton-attention-split-tile-size --trust-remote-code
        --uvicorn-access-log-exclude-prefixes --warmups --watchdog-timeout
        --weight-loader-disable-mmap --weight-version
        """,
        "",
    ),
    (
        "0.5.9",
        """
        --attention-context-parallel-size --attn-cp-size --extra-metric-labels
        --mamba-backend --moe-data-parallel-size --moe-dp-size
        """,
        """
        --disaggregation-decode-enable-fake-auto
        """,
    ),
    (
        "0.5.12",
        """
        --batch-notify-size --debug-cuda-graph --default-priority-value
        --detokenizer-worker-num --disable-piecewise-cuda-graph
        --disable-priority-preemption --disaggregation-decode-enable-radix-cache
        --elastic-ep-rejoin --enable-adaptive-dispatch-to-encoder
        --enable-aiter-allreduce-fusion --enable-breakable-cuda-graph
        --enable-deepep-waterfill --enable-dp-attention-local-control-broadcast
        --enable-elastic-expert-backup --enable-forward-pass-metrics
        --enable-fused-moe-sum-all-reduce --enable-hisparse --enable-http2
        --enable-mfu-metrics --enable-mis --enable-mm-global-cache
        --enable-prefill-context-parallel --enable-quant-communications
        --enable-return-indexer-topk --enable-ssl-refresh --enable-streaming-session
        --enable-strict-thinking --enforce-disable-flashinfer-allreduce-fusion
        --enforce-piecewise-cuda-graph --enforce-shared-experts-fusion
        --engine-info-bootstrap-port --experts-shared-outer-loras
        --forward-pass-metrics-ipc-name --forward-pass-metrics-worker-id --gc-threshold
        --grpc-http-sidecar-port --hisparse-config --incremental-streaming-output
        --linear-attn-backend --linear-attn-decode-backend --linear-attn-prefill-backend
        --lora-drain-wait-threshold --lora-strict-loading --lora-use-virtual-experts
        --model-config-parser --modelexpress-config --msprobe-dump-config
        --no-experts-shared-outer-loras --no-lora-strict-loading --no-record-nolora-graph
        --pre-warm-nccl --prefill-cp-mode --prefill-delayer-max-delay-ms
        --prefill-delayer-queue-min-ratio --prefill-only-disable-kv-cache
        --record-nolora-graph --speculative-adaptive --speculative-adaptive-config
        --speculative-dflash-block-size --speculative-dflash-draft-window-size
        --speculative-draft-window-size --speculative-ngram-external-corpus-max-tokens
        --speculative-ngram-external-corpus-path --speculative-ngram-external-sam-budget
        --speculative-ngram-max-trie-depth --speculative-skip-dp-mlp-sync --ssl-ca-certs
        --ssl-certfile --ssl-keyfile --ssl-keyfile-password
        --stream-response-default-include-usage --strip-thinking-cache --tokenizer-backend
        --use-ray --weight-loader-drop-cache-after-load --weight-loader-prefetch-checkpoints
        --weight-loader-prefetch-num-threads
        """,
        """
        --disable-hicache-numa-detect --disaggregation-decode-dp --disaggregation-decode-tp
        --disaggregation-prefill-pp --ds-channel-config-path --ds-heavy-channel-num
        --ds-heavy-channel-type --ds-heavy-token-num --ds-sparse-decode-threshold
        --enable-double-sparsity --mm-max-concurrent-calls --mm-per-request-timeout
        --multi-item-scoring-delimiter --speculative-ngram-branch-length
        --speculative-ngram-max-match-window-size --speculative-ngram-min-match-window-size
        """,
    ),
    (
        "0.5.16",
        """
        --asr-max-buffer-seconds --asr-max-concurrent-sessions --bf16-gemm-backend
        --cp-strategy --cuda-graph-backend-decode --cuda-graph-backend-prefill
        --cuda-graph-bs-decode --cuda-graph-bs-prefill --cuda-graph-config
        --cuda-graph-max-bs-decode --cuda-graph-max-bs-prefill --cuda-graph-tc-compiler
        --dcp-size --decode-context-parallel-size --decoupled-spec-bind-endpoint
        --decoupled-spec-connect-endpoints --decoupled-spec-rank --decoupled-spec-role
        --deepep-dispatcher-output-dtype --default-chat-template-kwargs
        --disable-attn-tp-gather --disable-decode-cuda-graph --disable-prefill-cuda-graph
        --disaggregation-decode-extra-slots --dllm-fdfo --dsa-decode-backend
        --dsa-paged-mqa-logits-backend --dsa-prefill-backend --dsa-prefill-cp-mode
        --dsa-topk-backend --elastic-ep-initial-size --elastic-ep-join-mode
        --elastic-ep-join-rank-offset --elastic-ep-scale-timeout
        --enable-deepseek-v4-fp4-indexer --enable-dsa-cache-layer-split
        --enable-dsa-prefill-context-parallel --enable-flexkv --enable-gdn-replayssm-spec
        --enable-int8-mamba-checkpoint --enable-linear-replayssm
        --enable-mamba-cache-stochastic-rounding --enable-page-major-kv-layout
        --enable-prefill-cp --enable-scattered-sconv --enable-session-radix-cache
        --enable-tf32-matmul --enable-unified-memory --enable-waterfill
        --encoder-bootstrap-port --encoder-register-urls
        --flashinfer-allreduce-fusion-backend --flexkv-config-file --fuseep-mode --grpc-port
        --int8-mamba-ckpt-size --kv-canary --kv-canary-real-data --kv-canary-sweep-interval
        --linear-replayssm-cache-len --lmcache-config-file --load-snapshot-publish-interval
        --mamba-cache-philox-rounds --mamba-radix-cache-strategy --max-ep-size
        --min-free-slots-delay --mm-feature-transport --no-dllm-fdfo
        --optimistic-prefill-attempts --radix-cache-backend --retraction-policy --sidecar
        --sidecar-args --smg-grpc-mode --smg-http-sidecar-port --spec-trace-dir
        --speculative-dspark-align-verify-tokens-to-graph-tier
        --speculative-dspark-block-size --speculative-dspark-confidence-sts-path
        --speculative-dspark-sps-table-path --speculative-use-rejection-sampling
        --trace-modules
        """,
        """
        --custom-sigquit-handler --debug-tensor-dump-inject --enable-deepep-waterfill
        --enable-nan-detection --enable-piecewise-cuda-graph --hybrid-kvcache-ratio
        --no-record-nolora-graph --record-nolora-graph
        """,
    ),
    (
        "0.5.23",
        """
        --allowed-media-domains --attention-data-parallel-size --attn-dp-size
        --boundary-reduction --c128-page-size --constrained-json-max-whitespace-cnt
        --context-bucket --cuda-graph-max-seq-len-prefill --cuda-graph-prefill-max-context
        --dcp-comm-backend --dcp-replicate-q-proj --deepep-v2-mode
        --disable-aiter-allreduce-fusion-in-decode
        --disable-aiter-allreduce-fusion-in-prefill
        --disaggregation-decode-allocation-policy
        --disaggregation-decode-host-receive-threshold
        --disaggregation-decode-retraction-backup --disaggregation-enable-kv-checksum
        --dsa-triton-union --dsv4-attn-backend --dsv4-prefill-backend --dwdp-size
        --enable-amd-monokernel --enable-cp-decode-attn-tp
        --enable-decoder-swa-bounded-replay --enable-dense-mlp-attn-tp
        --enable-dsa-fused-indexer --enable-encoder-swa-bounded-replay --enable-hicache
        --enable-http-worker-reuseport --enable-kv-cache-sharding --enable-layernorm-sp
        --enable-lean-attention --enable-linear-replayssm-spec --enable-linker-mla-dedup
        --enable-megamoe-for-layernorm-sp --enable-nvidia-megakernel --enable-paged-experts
        --enable-pd-role-switch --enable-response-store --enable-return-aux-hidden-states
        --enable-shared-experts-attn-tp --enable-tp-lm-head-all-to-all
        --enable-unified-cache-external-linker --enable-w4a4-mxfp4-megamoe
        --enable-watermark --expert-balancedness-report-mode --flashinfer-a2a-dispatch-type
        --flashinfer-autotune-skip-ops --gated-launch-port --grpc-response-timeout-secs
        --hicache-host-memory-fraction --hicache-host-memory-mode
        --hicache-storage-prefetch-retry-max-attempts
        --hicache-storage-prefetch-retry-poll-interval
        --http2-initial-connection-window-size --http2-max-concurrent-streams
        --image-processor-backend --language-model-only --linear-attn-verify-backend
        --load-publish-endpoint --mamba-max-states-per-path --media-url-max-file-size-mb
        --mlx-enable-sampling --mm-global-cache-backend --mm-io-worker-num
        --mm-preprocess-cache-size-mb --mm-processor-worker-num --monokernel-backend
        --no-dcp-replicate-q-proj --no-enable-decoder-swa-bounded-replay
        --no-enable-dsa-fused-indexer --no-enable-fused-qk-norm-rope --no-enable-tf32-matmul
        --no-enable-tp-lm-head-all-to-all --no-mm-enable-dp-encoder
        --no-ple-offload-embedding --no-speculative-enable-w4a4-mxfp4-megamoe
        --otlp-service-name --paged-experts-num-resident --ple-offload-backend
        --ple-offload-dir --ple-offload-embedding --prefill-decode-interval
        --prefill-decode-interval-min-bs --prefill-kv-cache-dequant-dtype
        --qsa-indexer-dtype --radix-eviction-policy-config
        --return-aux-hidden-state-layer-ids --return-hidden-states-mode --return-input-ids
        --return-output-ids --sampling-mask-max-tokens --shared-experts-tp-size
        --speculative-domino-candidate-pool-size --speculative-draft-kv-cache-dtype
        --speculative-draft-sink-size --speculative-dsa-topk-backend
        --speculative-enable-w4a4-mxfp4-megamoe --speculative-use-block-verification
        --startup-weight-load-mode --swa-prefix-tails --trust-mm-content-hashes
        --trust-request-chat-template --unified-cache-external-linker-backend
        --unified-cache-external-linker-config --uno-lora-path --watermark-config
        --weight-cache-mode --weight-cache-socket --weight-cache-timeout
        """,
        """
        --collect-tokens-histogram --cuda-graph-bs --cuda-graph-max-bs
        --cuda-graph-tc-compiler --disable-piecewise-cuda-graph --dsa-prefill-cp-mode
        --elastic-ep-rejoin --enable-breakable-cuda-graph
        --enable-dsa-prefill-context-parallel --enable-expert-distribution-metrics
        --enable-gdn-replayssm-spec --enable-nsa-prefill-context-parallel
        --enable-prefill-context-parallel --enforce-piecewise-cuda-graph
        --keep-mm-feature-on-device --mamba-scheduler-strategy --nsa-decode-backend
        --nsa-prefill-backend --nsa-prefill-cp-mode --piecewise-cuda-graph-compiler
        --piecewise-cuda-graph-max-tokens --piecewise-cuda-graph-tokens --prefill-cp-mode
        --prefill-round-robin-balance --speculative-dflash-draft-window-size
        --speculative-skip-dp-mlp-sync --stream-output --torchao-config
        """,
    ),
)

# Fixed choices of the flags whose values denv writes (where the parser has them).
SGLANG_CHOICES: dict[str, dict[str, str]] = {
    "0.5.8": {
        "--kv-cache-dtype": "auto bf16 bfloat16 fp4_e2m1 fp8_e4m3 fp8_e5m2",
        "--quantization": (
            "auto-round awq awq_marlin bitsandbytes compressed-tensors fp8 gguf gptq gptq_marlin "
            "marlin modelopt modelopt_fp4 modelopt_fp8 modelslim moe_wna16 mxfp4 petit_nvfp4 qoq "
            "quark_int4fp8_moe w4afp8 w8a8_fp8 w8a8_int8"
        ),
        "--dtype": "auto bfloat16 float float16 float32 half",
        "--disaggregation-transfer-backend": "ascend fake mooncake nixl",
    },
    "0.5.9": {
        "--kv-cache-dtype": "auto bf16 bfloat16 fp4_e2m1 fp8_e4m3 fp8_e5m2",
        "--quantization": (
            "auto-round awq awq_marlin bitsandbytes compressed-tensors fp8 gguf gptq gptq_marlin "
            "marlin modelopt modelopt_fp4 modelopt_fp8 modelslim moe_wna16 mxfp4 mxfp8 "
            "petit_nvfp4 qoq quark_int4fp8_moe w4afp8 w8a8_fp8 w8a8_int8"
        ),
        "--dtype": "auto bfloat16 float float16 float32 half",
        "--disaggregation-transfer-backend": "ascend fake mooncake mori nixl",
    },
    "0.5.12": {
        "--kv-cache-dtype": "auto bf16 bfloat16 fp4_e2m1 fp8_e4m3 fp8_e5m2",
        "--quantization": (
            "auto-round awq awq_marlin bitsandbytes compressed-tensors fp8 gguf gptq gptq_marlin "
            "marlin mlx_q4 mlx_q8 modelopt modelopt_fp4 modelopt_fp8 modelopt_mixed modelslim "
            "moe_wna16 mxfp4 mxfp8 petit_nvfp4 qoq quark quark_int4fp8_moe unquant w4afp8 "
            "w8a8_fp8 w8a8_int8"
        ),
        "--dtype": "auto bfloat16 float float16 float32 half",
        "--disaggregation-transfer-backend": "ascend fake mooncake mori nixl",
    },
    "0.5.16": {
        "--kv-cache-dtype": (
            "auto bf16 bfloat16 fp4_e2m1 fp4_mx_block16 fp8_e4m3 fp8_e5m2 mxfp8 nvfp4"
        ),
        "--quantization": (
            "auto-round auto-round-int8 awq awq_marlin bitsandbytes compressed-tensors fp8 gguf "
            "gptq gptq_marlin humming marlin mlx_q4 mlx_q8 modelopt modelopt_fp4 modelopt_fp8 "
            "modelopt_mixed modelslim moe_wna16 mxfp4 mxfp8 mxfp_w4a8 nvfp4_online petit_nvfp4 "
            "quark quark_int4fp8_moe quark_mxfp4 unquant w4afp8 w8a8_fp8 w8a8_int8"
        ),
        "--dtype": "auto bfloat16 float float16 float32 half",
        "--disaggregation-transfer-backend": "ascend fake mooncake mooncake_tcp mori nixl",
        "--cuda-graph-backend-decode": "breakable disabled full tc_piecewise",
        "--cuda-graph-backend-prefill": "breakable disabled full tc_piecewise",
    },
    "0.5.23": {
        "--kv-cache-dtype": "auto bf16 bfloat16 fp4_mx_block16 fp8_e4m3 fp8_e5m2 mxfp8 nvfp4",
        "--quantization": (
            "auto-round auto-round-int8 awq awq_marlin bitsandbytes compressed-tensors fp8 gguf "
            "gptq gptq_marlin humming mlx_q4 mlx_q8 modelopt modelopt_fp4 modelopt_fp8 "
            "modelopt_mixed modelslim moe_wna16 mxfp4 mxfp8 mxfp_w4a8 nvfp4_online petit_nvfp4 "
            "quark quark_int4fp8_moe quark_mxfp4 unquant w4afp8 w8a8_fp8 w8a8_int8"
        ),
        "--dtype": "auto bfloat16 float float16 float32 half",
        "--disaggregation-transfer-backend": "ascend fake mooncake mooncake_tcp mori nixl",
        "--cuda-graph-backend-decode": "breakable disabled full",
        "--cuda-graph-backend-prefill": "breakable disabled full",
    },
}
