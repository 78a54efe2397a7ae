clformer-gemm-profile 1
# Shipped GEMM profile: Intel's OpenCL CPU runtime (PyPI intel-opencl-rt,
# platform "Intel(R) OpenCL") compiling for AVX2: on a CPU without AVX-512,
# or with CL_CONFIG_CPU_TARGET_ARCH=core-avx2 (the isa trait,
# docs/tuning.md).
# Provenance: `clformer probe --device intel --no-measure --no-validate
#   --tune --tokens 64,128,197 --budget 540` (the reference shapes: one
#   layer of BERT-base and of GPT-2 124M at 64, 128 and 197 rows),
#   2026-11-26, runtime 2026.22.10.0.01_160000 on a 2-core AMD EPYC whose
#   CPU has AVX2 and no AVX-512, CLBlast 1.5.3, nothing else running (load
#   average 1.1-1.5).  31 sets timed, 497 s.  The forward-pass GEMMs
#   (count-weighted sum) went from 1406 ms with CLBlast's defaults to 825
#   ms (1.70x); CLBlast reaches 10-20 GFLOP/s on this runtime, against
#   about 84 under PoCL with its profile.
# Skinny q8 1x4: one row times the shapes' weights 4.88 -> 3.83 ms.
# Rows (2026-11-26, same machine, idle): `probe --device intel --no-measure
#   --no-validate --tune --tokens 64,128,197 --budget 60` (only this line
#   shipped) after the [out, in] path gained skinny_tile (one launch of 4 x
#   3 register tiles for 2 rows or more).  The skinny path beats CLBlast at
#   every row count measured, to the search's last, 4096, for every weight
#   type: summed over one layer of BERT-base and GPT-2's weights, f32 47
#   against 416 ms at 64 rows, 136 / 875 at 192, 3285 / 19058 at 4096; q8
#   5154 / 17081 and q4 6485 / 18100 at 4096.  skinny_t on [in, out] (no
#   tiles) loses from 48 rows (389 against 364 ms).  Before skinny_tile the
#   line was f32=1536 f16=1536 q8=1536 q4=1024 f32_in_out=16, cut by the
#   search's clock.
# Tiles (2026-11-26, same machine): skinny_tile takes every [out, in]
#   product (Rows above was measured with it): GPT-2 124M over 64 tokens
#   218 ms against 341 with launches of up to 8 rows (`CLFORMER_SKINNY_TILE
#   =0 / 1`, `clformer run --repeat 3`).
# Tiles act_pass (2026-11-27, on the 2-core AMD EPYC with AVX-512, the
#   runtime compiling for AVX2 by CL_CONFIG_CPU_TARGET_ARCH=core-avx2):
#   `probe --tune --model GPT-2 --tokens 64 --budget 20` measured its
#   one-row products 43.3 ms with the activation in skinny_tile and 33.5
#   ms with it left to a pass of its own (GPT-2's head alone: q8 3.6-3.9 ->
#   2.4 ms, q4 3.8 -> 2.6); that run's other lines are not taken.
match platform=Intel(R) OpenCL device_type=CPU isa=avx2
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
default_ms 1406.1011
tuned_ms 825.0472
Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=16 MDIMC=16 MWG=64 NDIMB=16 NDIMC=16 NWG=64 SA=1 SB=1 STRM=0 STRN=0 VWM=2 VWN=2
XgemmDirect KWID=2 MDIMAD=8 MDIMCD=8 NDIMBD=32 NDIMCD=8 PADA=1 PADB=0 VWMD=8 VWND=2 WGD=64
GemmRoutine XGEMM_MIN_INDIRECT_SIZE=335
Skinny q8=1x4
Rows f32=4096 f16=4096 q8=4096 q4=4096 f32_in_out=32
Tiles on=1 act_pass=1
