/* gguf_types.h - ggml's tensor types as GGUF numbers them: name, elements
 * a block, bytes a block, and whether clf_gguf_dequantize decodes them.
 * One table (gguf_blocks.c; the types clformer has too come from
 * CLF_DTYPE_MAP) for the reader and the decoders; and the
 * metadata value types' names (gguf.c).  Internal. */
#ifndef CLF_IO_GGUF_TYPES_H
#define CLF_IO_GGUF_TYPES_H

typedef struct clf__ggml_type {
  const char *name; /* NULL: no ggml type has this number */
  unsigned block;   /* elements a block; 0: a type without a block layout here (IQ*, TQ*, MXFP4) */
  unsigned bytes;   /* bytes a block */
  int decoded;      /* clf_gguf_dequantize decodes it */
} clf__ggml_type;

/* Type t's row, or NULL past the table or where ggml has no type t. */
const clf__ggml_type *clf__ggml_type_of(unsigned t);

/* The name of metadata value type t (clf_gguf_type: "u32", "f32",
 * "string", "array", ...), or "unknown". */
const char *clf__gguf_value_type_name(unsigned t);

#endif /* CLF_IO_GGUF_TYPES_H */
