clformer-gemm-profile 1
# Shipped GEMM profile: Intel's OpenCL CPU runtime (PyPI intel-opencl-rt,
# platform "Intel(R) OpenCL") compiling for AVX-512: on a CPU with AVX-512
# (its default there), or with CL_CONFIG_CPU_TARGET_ARCH=skx (the isa
# trait, docs/tuning.md).
# Provenance: `clformer probe --device intel --no-measure --no-validate
#   --tune --tokens 64,128,197 --budget 540` (the reference shapes: one
#   layer of BERT-base and of GPT-2 124M at 64, 128 and 197 rows),
#   2026-11-27, runtime 2026.22.10.0.01_160000 on a 2-core AMD EPYC with
#   AVX-512 (F, BW, VL, VNNI, BF16), CLBlast 1.5.3, nothing else running
#   (load average under 1.1).  The forward-pass GEMMs (count-weighted sum)
#   went from 433 ms with CLBlast's defaults to 136 ms (3.2x); 41 sets
#   improved on the best so far during the search.
# Rows (same run): the skinny path on [out, in] weights (skinny_tile from 2
#   rows) beats CLBlast to the search's last row count, 4096, for f32, f16
#   and q8 (f32 at 4096 rows: 2631 against 5265 ms; q8 at 768: 625 against
#   728); q4 wins at 128 rows (96 against 105 ms) and loses at 192 (150
#   against 145); f32 [in, out] (skinny_t) wins at 32 rows (49 against 58)
#   and loses at 48 (89 against 76).  The q4 and [in, out] values are where
#   the two lines between those points cross (the rule `probe --tune`
#   applies since 2026-11-27; the run kept 128 and 32).  Skinny groups were not searched: on this device every [out, in]
#   product runs skinny_tile.
# Tiles act_pass (2026-11-27, later, the same machine and runtime): `probe
#   --tune --model GPT-2 --tokens 64 --budget 20` measured its one-row
#   products 46.5 ms with the activation in skinny_tile and 39.7 ms with it
#   left to a pass of its own (f32 and f16 alike; GPT-2's head alone, 50257
#   x 768: q8 3.5 -> 2.2 ms, q4 3.7 -> 2.5); that run's other lines are not
#   taken (its budget was 20 s).
# No Tiles int= (2026-12-05, session 28; issue 42): one-row products of
#   Q8_0, Q4_0, Q4_1 ran 1.27-1.64x as fast on the integer path (process
#   CPU time, 2-core Xeon with AVX-512 VNNI under KVM at load average
#   8-16; Q4_1 3072 x 576: 0.12 against 0.18 ms), 4 rows 0.58-0.66x, and
#   SmolLM2 Q4_1 decoding took 26-33 CPU ms a token against 35.  int=1
#   was tried and not kept: a product's result then depends on its row
#   count, and test_engine's engine_matches_alone failed (smollm_like,
#   sequence 4: token 3 is 250 batched, 352 alone), as did test_llama's
#   qwen2_q8 greedy golden (token 15).  CLFORMER_SKINNY_INT=1 asks for it.
match platform=Intel(R) OpenCL device_type=CPU isa=avx512
match driver=any local_mem_kib=any compute_units=any
shape m=64 n=2304 k=768 trans_a=0 trans_b=0 count=1
shape m=64 n=768 k=768 trans_a=0 trans_b=0 count=1
shape m=64 n=3072 k=768 trans_a=0 trans_b=0 count=1
shape m=64 n=768 k=3072 trans_a=0 trans_b=0 count=1
shape m=64 n=2304 k=768 trans_a=0 trans_b=1 count=1
shape m=64 n=768 k=768 trans_a=0 trans_b=1 count=1
shape m=64 n=3072 k=768 trans_a=0 trans_b=1 count=1
shape m=64 n=768 k=3072 trans_a=0 trans_b=1 count=1
shape m=128 n=2304 k=768 trans_a=0 trans_b=0 count=1
shape m=128 n=768 k=768 trans_a=0 trans_b=0 count=1
shape m=128 n=3072 k=768 trans_a=0 trans_b=0 count=1
shape m=128 n=768 k=3072 trans_a=0 trans_b=0 count=1
shape m=128 n=2304 k=768 trans_a=0 trans_b=1 count=1
shape m=128 n=768 k=768 trans_a=0 trans_b=1 count=1
shape m=128 n=3072 k=768 trans_a=0 trans_b=1 count=1
shape m=128 n=768 k=3072 trans_a=0 trans_b=1 count=1
shape m=197 n=2304 k=768 trans_a=0 trans_b=0 count=1
shape m=197 n=768 k=768 trans_a=0 trans_b=0 count=1
shape m=197 n=3072 k=768 trans_a=0 trans_b=0 count=1
shape m=197 n=768 k=3072 trans_a=0 trans_b=0 count=1
shape m=197 n=2304 k=768 trans_a=0 trans_b=1 count=1
shape m=197 n=768 k=768 trans_a=0 trans_b=1 count=1
shape m=197 n=3072 k=768 trans_a=0 trans_b=1 count=1
shape m=197 n=768 k=3072 trans_a=0 trans_b=1 count=1
default_ms 433.4945
tuned_ms 135.8038
Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=16 MDIMC=16 MWG=16 NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=8
XgemmDirect KWID=8 MDIMAD=16 MDIMCD=8 NDIMBD=16 NDIMCD=8 PADA=1 PADB=0 VWMD=2 VWND=1 WGD=32
GemmRoutine XGEMM_MIN_INDIRECT_SIZE=335
Tiles on=1 act_pass=1
Rows f32_in_out=38 q4=169 q8=4096 f16=4096 f32=4096
