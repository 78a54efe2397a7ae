clformer-gemm-profile 1
# Shipped GEMM profile: PoCL's CPU device on AVX-512 x86 (PoCL names the ISA
# "skylake-avx512" in the device name, e.g. "pthread-skylake-avx512-AMD EPYC").
# Provenance (not re-measured: the machine that made this release has AVX2 only):
#  Xgemm: the winner of clblast_tuner_xgemm's random stage at m=128 n=3072 k=768
#    (BERT-base's FFN at 128 tokens), PoCL 3.1 on a 2-core AMD EPYC Zen 5,
#    130 GFLOP/s kernel time against ~15 with CLBlast's defaults
#    (MEASURED.md, 2026-11-23).
#  XgemmDirect and the switch: what `clformer probe --tune` found on the same
#    device for all-MiniLM-L6-v2 at 32, 128 and 1024 rows, 3.0x over the
#    defaults (docs/tuning.md, 2026-11-22).
match platform=Portable Computing Language device_type=CPU isa=skylake-avx512
match driver=any local_mem_kib=64- compute_units=any
Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=16 MDIMC=8 MWG=128 NDIMB=32 NDIMC=16 NWG=128 SA=0 SB=0 STRM=1 STRN=1 VWM=8 VWN=4
XgemmDirect KWID=2 MDIMAD=8 MDIMCD=8 NDIMBD=32 NDIMCD=8 PADA=1 PADB=0 VWMD=8 VWND=2 WGD=64
GemmRoutine XGEMM_MIN_INDIRECT_SIZE=167
