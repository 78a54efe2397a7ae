clformer-gemm-profile 1
# Shipped GEMM profile: PoCL's CPU device on AVX-512 x86 (PoCL names the ISA
# "skylake-avx512" in the device name, e.g. "pthread-skylake-avx512-AMD EPYC").
# Provenance: `clformer probe --device pthread --no-measure --no-validate
#   --tune --tokens 64,128,197 --budget 540` (the reference shapes: one
#   layer of BERT-base and of GPT-2 124M at 64, 128 and 197 rows),
#   2026-11-27, PoCL 3.1 (Debian 3.1-3+deb12u1) on a 2-core AMD EPYC with AVX-512
#   (F, BW, VL, VNNI, BF16), CLBlast 1.5.3, nothing else running.  The
#   forward-pass GEMMs (count-weighted sum) went from 889 ms with CLBlast's
#   defaults to 160 ms (5.6x).  The Xgemm line is the one the previous
#   release shipped unmeasured (clblast_tuner_xgemm's winner at m=128
#   n=3072 k=768, MEASURED.md, 2026-11-23): no set the search tried beat it.
# Tiles (same run): skinny_tile against launches of the skinny kernel, over
#   the shapes' weights of every type: 36.1 ms against 27.4 at one row,
#   580 against 1927 at the shapes' rows.
# Rows (same run): the skinny path on [out, in] weights beats CLBlast at
#   3072 rows for f32 (2836 against 2964 ms) and loses at 4096 (5407 against
#   5045), wins to the search's last, 4096, for f16; q8 wins at 256 rows
#   (200 against 236) and loses at 384 (389 against 357), q4 wins at 192
#   (276 against 305) and loses at 256 (374 against 285), f32 [in, out]
#   (skinny_t) wins at 96 (135.5 against 136.6) and loses at 128 (123
#   against 105).  Each value is where the two lines between those points
#   cross (the rule `probe --tune` applies since 2026-11-27; the run kept
#   the last row count won: 3072, 256, 192 and 96).
# Tiles int_lanes=16 (2026-12-05, session 28, by hand; issue 42): the
#   integer path's portable build in 16 int lanes, which LLVM 15 compiles
#   here into pmaddwd and one add where the 8-lane pairs took two more
#   shuffles: one row of Q4_1 3072 x 576, process CPU time against the
#   float path, 1.08x -> 1.17x (Q4_0 3072 x 768 1.03 -> 1.13, Q8_0 768 x
#   3072 0.96 -> 1.07); 2-core Xeon under KVM at load average 8-16.  No
#   int=: whole SmolLM2 Q4_1 decoding was even (CPU ms a token 28.5 and
#   28.8 integer, 26.8 and 28.5 float), so the path runs only when asked.
match platform=Portable Computing Language device_type=CPU isa=skylake-avx512
match driver=any local_mem_kib=64- compute_units=any
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
default_ms 888.9501
tuned_ms 159.7146
Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=16 MDIMC=8 MWG=128 NDIMB=32 NDIMC=16 NWG=128 SA=0 SB=0 STRM=1 STRN=1 VWM=8 VWN=4
XgemmDirect KWID=2 MDIMAD=8 MDIMCD=8 NDIMBD=32 NDIMCD=8 PADA=0 PADB=0 VWMD=8 VWND=1 WGD=64
GemmRoutine XGEMM_MIN_INDIRECT_SIZE=335
Tiles on=1 int_lanes=16
Rows f32_in_out=97 q4=207 q8=323 f16=4096 f32=3338
