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
# Rows: this runtime's skinny kernel on [out, in] weights beats CLBlast at
#   every row count measured (f32: 269 against 1126 ms summed over the
#   weights at 192 rows, 2431 against 7484 at 1536; q4 2125 against 5489
#   at 1024), while skinny_t on [in, out] loses from 24 rows (433 against
#   409 ms).  The crossover search went on past the shapes' rows while the
#   skinny path won, until its time ran out (1536 rows for f32, f16 and q8,
#   1024 for q4): a second run, `--budget 60`, same day, idle, with this
#   file applied (its GEMM search ended on these same parameters).
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
Rows f32=1536 f16=1536 q8=1536 q4=1024 f32_in_out=16
