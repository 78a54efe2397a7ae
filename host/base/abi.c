/* abi.c - the layouts of the public structs, for bindings that declare them
 * on their own side (the Python package's ctypes Structures): one table of
 * sizeof and offsetof rows, so a binding can check its copy when it loads
 * the library instead of silently reading the wrong bytes.
 */
#include "status.h"

#include <string.h>

typedef struct clf__layout_row {
  const char *type;  /* "clf_model_options" */
  const char *field; /* "weights"; NULL in the row of the struct itself */
  size_t offset;
  size_t size;
} clf__layout_row;

#define CLF__STRUCT(T) {#T, NULL, 0, sizeof(T)}
#define CLF__FIELD(T, f) {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)}

/* Every struct of clformer.h with public fields, each field in order. */
static const clf__layout_row rows[] = {
    CLF__STRUCT(clf_device_desc),
    CLF__FIELD(clf_device_desc, platform_index),
    CLF__FIELD(clf_device_desc, device_index),
    CLF__FIELD(clf_device_desc, platform),
    CLF__FIELD(clf_device_desc, device),
    CLF__FIELD(clf_device_desc, type),
    CLF__FIELD(clf_device_desc, platform_name),
    CLF__FIELD(clf_device_desc, device_name),
    CLF__FIELD(clf_device_desc, vendor),
    CLF__FIELD(clf_device_desc, driver_version),
    CLF__FIELD(clf_device_desc, device_version),

    CLF__STRUCT(clf_dtype_desc),
    CLF__FIELD(clf_dtype_desc, dtype),
    CLF__FIELD(clf_dtype_desc, name),
    CLF__FIELD(clf_dtype_desc, weight_name),
    CLF__FIELD(clf_dtype_desc, ggml_type),
    CLF__FIELD(clf_dtype_desc, block),
    CLF__FIELD(clf_dtype_desc, block_bytes),
    CLF__FIELD(clf_dtype_desc, weights_target),
    CLF__FIELD(clf_dtype_desc, from_f32),
    CLF__FIELD(clf_dtype_desc, ggml_layout),
    CLF__FIELD(clf_dtype_desc, linear_weight),

    CLF__STRUCT(clf_generate_setting),
    CLF__FIELD(clf_generate_setting, name),
    CLF__FIELD(clf_generate_setting, type),
    CLF__FIELD(clf_generate_setting, min),
    CLF__FIELD(clf_generate_setting, max),
    CLF__FIELD(clf_generate_setting, min_excluded),
    CLF__FIELD(clf_generate_setting, has_default),
    CLF__FIELD(clf_generate_setting, default_value),
    CLF__FIELD(clf_generate_setting, sampling),
    CLF__FIELD(clf_generate_setting, whole),
    CLF__FIELD(clf_generate_setting, metavar),
    CLF__FIELD(clf_generate_setting, default_text),
    CLF__FIELD(clf_generate_setting, help),

    CLF__STRUCT(clf_context_options),
    CLF__FIELD(clf_context_options, device),
    CLF__FIELD(clf_context_options, profiling),
    CLF__FIELD(clf_context_options, cache_dir),
    CLF__FIELD(clf_context_options, kernel_dir),
    CLF__FIELD(clf_context_options, log),
    CLF__FIELD(clf_context_options, log_user),
    CLF__FIELD(clf_context_options, device_class),
    CLF__FIELD(clf_context_options, limits),
    CLF__FIELD(clf_context_options, progress),
    CLF__FIELD(clf_context_options, progress_user),

    CLF__STRUCT(clf_profile_entry),
    CLF__FIELD(clf_profile_entry, op),
    CLF__FIELD(clf_profile_entry, count),
    CLF__FIELD(clf_profile_entry, ms),

    CLF__STRUCT(clf_cache_stats),
    CLF__FIELD(clf_cache_stats, programs_built),
    CLF__FIELD(clf_cache_stats, programs_from_disk),
    CLF__FIELD(clf_cache_stats, disk_rejected),
    CLF__FIELD(clf_cache_stats, disk_written),
    CLF__FIELD(clf_cache_stats, build_failures),
    CLF__FIELD(clf_cache_stats, build_ms),

    CLF__STRUCT(clf_attention_mask),
    CLF__FIELD(clf_attention_mask, key_padding),
    CLF__FIELD(clf_attention_mask, causal),
    CLF__FIELD(clf_attention_mask, bias),
    CLF__FIELD(clf_attention_mask, window),
    CLF__FIELD(clf_attention_mask, softcap),

    CLF__STRUCT(clf_array),
    CLF__FIELD(clf_array, name),
    CLF__FIELD(clf_array, dtype),
    CLF__FIELD(clf_array, ndim),
    CLF__FIELD(clf_array, shape),
    CLF__FIELD(clf_array, data),

    CLF__STRUCT(clf_gguf_kv),
    CLF__FIELD(clf_gguf_kv, key),
    CLF__FIELD(clf_gguf_kv, type),
    CLF__FIELD(clf_gguf_kv, elem),
    CLF__FIELD(clf_gguf_kv, count),

    CLF__STRUCT(clf_gguf_tensor),
    CLF__FIELD(clf_gguf_tensor, name),
    CLF__FIELD(clf_gguf_tensor, ggml_type),
    CLF__FIELD(clf_gguf_tensor, type_name),
    CLF__FIELD(clf_gguf_tensor, ndim),
    CLF__FIELD(clf_gguf_tensor, shape),
    CLF__FIELD(clf_gguf_tensor, offset),
    CLF__FIELD(clf_gguf_tensor, bytes),

    CLF__STRUCT(clf_st_info),
    CLF__FIELD(clf_st_info, name),
    CLF__FIELD(clf_st_info, dtype),
    CLF__FIELD(clf_st_info, ndim),
    CLF__FIELD(clf_st_info, shape),
    CLF__FIELD(clf_st_info, data),
    CLF__FIELD(clf_st_info, bytes),

    CLF__STRUCT(clf_model_options),
    CLF__FIELD(clf_model_options, weights),
    CLF__FIELD(clf_model_options, simulate),
    CLF__FIELD(clf_model_options, progress),
    CLF__FIELD(clf_model_options, progress_user),

    CLF__STRUCT(clf_generate_options),
    CLF__FIELD(clf_generate_options, max_new_tokens),
    CLF__FIELD(clf_generate_options, num_beams),
    CLF__FIELD(clf_generate_options, do_sample),
    CLF__FIELD(clf_generate_options, temperature),
    CLF__FIELD(clf_generate_options, top_k),
    CLF__FIELD(clf_generate_options, top_p),
    CLF__FIELD(clf_generate_options, min_p),
    CLF__FIELD(clf_generate_options, repetition_penalty),
    CLF__FIELD(clf_generate_options, no_repeat_ngram_size),
    CLF__FIELD(clf_generate_options, seed),
    CLF__FIELD(clf_generate_options, on_token),
    CLF__FIELD(clf_generate_options, user),
    CLF__FIELD(clf_generate_options, eos_token_ids),
    CLF__FIELD(clf_generate_options, n_eos_token_ids),

    CLF__STRUCT(clf_chat_options),
    CLF__FIELD(clf_chat_options, generate),
    CLF__FIELD(clf_chat_options, stop),
    CLF__FIELD(clf_chat_options, n_stop),
    CLF__FIELD(clf_chat_options, on_text),
    CLF__FIELD(clf_chat_options, user),

    CLF__STRUCT(clf_engine_options),
    CLF__FIELD(clf_engine_options, kv_bytes),
    CLF__FIELD(clf_engine_options, block_size),
    CLF__FIELD(clf_engine_options, max_step_rows),
    CLF__FIELD(clf_engine_options, max_sequences),
    CLF__FIELD(clf_engine_options, kv_dtype),

    CLF__STRUCT(clf_engine_request),
    CLF__FIELD(clf_engine_request, ids),
    CLF__FIELD(clf_engine_request, n_ids),
    CLF__FIELD(clf_engine_request, options),
    CLF__FIELD(clf_engine_request, isolation),
    CLF__FIELD(clf_engine_request, on_token),
    CLF__FIELD(clf_engine_request, on_done),
    CLF__FIELD(clf_engine_request, user),
    CLF__FIELD(clf_engine_request, n),
    CLF__FIELD(clf_engine_request, on_token_info),
    CLF__FIELD(clf_engine_request, top_logprobs),
    CLF__FIELD(clf_engine_request, allowed),

    CLF__STRUCT(clf_sequence_end),
    CLF__FIELD(clf_sequence_end, why),
    CLF__FIELD(clf_sequence_end, error),
    CLF__FIELD(clf_sequence_end, prompt_tokens),
    CLF__FIELD(clf_sequence_end, new_tokens),
    CLF__FIELD(clf_sequence_end, cached_tokens),

    CLF__STRUCT(clf_token_info),
    CLF__FIELD(clf_token_info, token),
    CLF__FIELD(clf_token_info, logprob),
    CLF__FIELD(clf_token_info, n_top),
    CLF__FIELD(clf_token_info, top_tokens),
    CLF__FIELD(clf_token_info, top_logprobs),

    CLF__STRUCT(clf_engine_stats),
    CLF__FIELD(clf_engine_stats, blocks),
    CLF__FIELD(clf_engine_stats, block_size),
    CLF__FIELD(clf_engine_stats, block_bytes),
    CLF__FIELD(clf_engine_stats, blocks_used),
    CLF__FIELD(clf_engine_stats, blocks_cached),
    CLF__FIELD(clf_engine_stats, running),
    CLF__FIELD(clf_engine_stats, waiting),
    CLF__FIELD(clf_engine_stats, prefix_tokens_reused),
    CLF__FIELD(clf_engine_stats, preemptions),
    CLF__FIELD(clf_engine_stats, blocks_copied),
    CLF__FIELD(clf_engine_stats, steps),
    CLF__FIELD(clf_engine_stats, rows),
    CLF__FIELD(clf_engine_stats, window_blocks),
    CLF__FIELD(clf_engine_stats, window_block_bytes),
    CLF__FIELD(clf_engine_stats, window_blocks_used),

    CLF__STRUCT(clf_template_budget),
    CLF__FIELD(clf_template_budget, steps),
    CLF__FIELD(clf_template_budget, bytes),
    CLF__FIELD(clf_template_budget, memory),

    CLF__STRUCT(clf_chat_turn),
    CLF__FIELD(clf_chat_turn, prompt_tokens),
    CLF__FIELD(clf_chat_turn, reused_tokens),
    CLF__FIELD(clf_chat_turn, new_tokens),
    CLF__FIELD(clf_chat_turn, finished),

    CLF__STRUCT(clf_image),
    CLF__FIELD(clf_image, width),
    CLF__FIELD(clf_image, height),
    CLF__FIELD(clf_image, rgb),

    CLF__STRUCT(clf_image_processor),
    CLF__FIELD(clf_image_processor, do_resize),
    CLF__FIELD(clf_image_processor, width),
    CLF__FIELD(clf_image_processor, height),
    CLF__FIELD(clf_image_processor, resample),
    CLF__FIELD(clf_image_processor, do_rescale),
    CLF__FIELD(clf_image_processor, rescale_factor),
    CLF__FIELD(clf_image_processor, do_normalize),
    CLF__FIELD(clf_image_processor, mean),
    CLF__FIELD(clf_image_processor, std),

    CLF__STRUCT(clf_variant_result),
    CLF__FIELD(clf_variant_result, name),
    CLF__FIELD(clf_variant_result, fallback),
    CLF__FIELD(clf_variant_result, passed),
    CLF__FIELD(clf_variant_result, max_error),
    CLF__FIELD(clf_variant_result, tolerance),
    CLF__FIELD(clf_variant_result, ms),
    CLF__FIELD(clf_variant_result, message),

    CLF__STRUCT(clf_gemm_shape),
    CLF__FIELD(clf_gemm_shape, m),
    CLF__FIELD(clf_gemm_shape, n),
    CLF__FIELD(clf_gemm_shape, k),
    CLF__FIELD(clf_gemm_shape, trans_a),
    CLF__FIELD(clf_gemm_shape, trans_b),
    CLF__FIELD(clf_gemm_shape, count),

    CLF__STRUCT(clf_tune_options),
    CLF__FIELD(clf_tune_options, budget_s),
    CLF__FIELD(clf_tune_options, seed),
    CLF__FIELD(clf_tune_options, progress),
    CLF__FIELD(clf_tune_options, progress_user),

    CLF__STRUCT(clf_tune_result),
    CLF__FIELD(clf_tune_result, default_ms),
    CLF__FIELD(clf_tune_result, tuned_ms),
    CLF__FIELD(clf_tune_result, best_ms),

    CLF__STRUCT(clf_tune_report),
    CLF__FIELD(clf_tune_report, default_ms),
    CLF__FIELD(clf_tune_report, tuned_ms),
    CLF__FIELD(clf_tune_report, tried),
    CLF__FIELD(clf_tune_report, rejected),
    CLF__FIELD(clf_tune_report, seconds),
    CLF__FIELD(clf_tune_report, profile),
    CLF__FIELD(clf_tune_report, skinny),
    CLF__FIELD(clf_tune_report, rows),
};

#undef CLF__STRUCT
#undef CLF__FIELD

/* The row of `type` (field NULL) or of its `field`; NULL when unknown. */
static const clf__layout_row *find_row(const char *type, const char *field) {
  if (!type)
    return NULL;
  for (size_t i = 0; i < CLF__ARRAY_LEN(rows); i++) {
    const clf__layout_row *r = &rows[i];
    if (strcmp(r->type, type) != 0)
      continue;
    if (field ? r->field && strcmp(r->field, field) == 0 : !r->field)
      return r;
  }
  return NULL;
}

size_t clf_struct_size(const char *struct_name) {
  const clf__layout_row *r = find_row(struct_name, NULL);
  return r ? r->size : CLF_LAYOUT_UNKNOWN;
}

size_t clf_field_offset(const char *struct_name, const char *field) {
  const clf__layout_row *r = field ? find_row(struct_name, field) : NULL;
  return r ? r->offset : CLF_LAYOUT_UNKNOWN;
}

size_t clf_field_size(const char *struct_name, const char *field) {
  const clf__layout_row *r = field ? find_row(struct_name, field) : NULL;
  return r ? r->size : CLF_LAYOUT_UNKNOWN;
}
