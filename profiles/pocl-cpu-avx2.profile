clformer-gemm-profile 1
# Shipped GEMM profile: PoCL's CPU device on AVX2 x86 (PoCL names the ISA
# "haswell" in the device name, e.g. "pthread-haswell-AMD EPYC").
# Provenance: `clformer probe --device pthread --no-measure --no-validate
#   --tune --tokens 64,128,197 --budget 480` (the reference shapes: one layer
#   of BERT-base and of GPT-2 124M at 64, 128 and 197 rows), 2026-11-24,
#   PoCL 3.1 / LLVM 15 on a 2-core AMD EPYC whose LLVM target is haswell
#   (AVX2, no AVX-512), CLBlast 1.5.3; the 2 cores were shared with other
#   jobs (load average 3-4), so the times are noisy.  14 sets timed, 501 s.
#   The forward-pass GEMMs (count-weighted sum) went from 2425 ms with
#   CLBlast's defaults to 757 ms as combined (503 ms in the Xgemm phase).
#   Xgemm is clblast_tuner_xgemm's random-stage winner at 128x3072x768 on Zen 5
#   (a seed of the search), the fastest of the 14 here too.
# Skinny (2026-11-25, same machine): q8 at 1x4 instead of the CPU default 4x8:
#   `probe --tune --model <GPT-2 124M> --tokens 64` picked it (38.1 -> 16.0 ms
#   for one row times every weight), and GPT-2 124M's q8 decode took 24.1 and
#   19.5 ms of device time per token against 27.2 and 36.6 with 4x8 (two
#   interleaved rounds of `clformer generate --profile`).  The other types'
#   winners did not hold up in the same check, so they keep the defaults.
# Rows (2026-11-26, same machine, nothing else running, load average 1.0):
#   where CLBlast with this profile's parameters overtakes the skinny path,
#   per weight type and layout, from `clformer probe --device pthread
#   --no-measure --no-validate --tune --tokens 64,128,197 --budget 60` (its
#   GEMM search is not shipped; only this line), after the [out, in] path
#   gained skinny_tile (one launch of 4 x 3 register tiles for 2 rows or
#   more).  Summed over one layer of BERT-base and GPT-2's weights, ms,
#   skinny / CLBlast: f32 [out, in] 57 / 343 at 64 rows, 182 / 584 at 192,
#   5870 / 8870 at 4096 (the search's last row count); f16 81 / 268 at 64,
#   5335 / 8367 at 4096; q8 105 / 285 at 64, 4919 / 5312 at 3072, 8878 /
#   8402 at 4096; q4 116 / 259 at 64, 378 / 527 at 192, 551 / 539 at 256;
#   f32 [in, out] (skinny_t, no tiles) 160 / 230 at 64, 308 / 224 at 128.
#   An earlier run the same hour put f32_in_out at 64.  Before skinny_tile
#   the line was f32=48 f16=48 q8=96 q4=48 f32_in_out=96.  The run kept the
#   last row count won (q8 3072, q4 192); q8 and q4 are now where the lines
#   through the figures above cross (the rule `probe --tune` applies since
#   2026-11-27): 3535 and 251.  f32_in_out stays 96: the figures at 96 rows
#   were not recorded.
# Tiles (2026-11-26, same machine): skinny_tile takes every [out, in]
#   product (Rows above was measured with it).  One product of PoCL, ms,
#   tiles against launches of up to 8 rows of the skinny kernel: f32 64 x
#   768 by 3072 x 768 4.4 / 22; one row times GPT-2's head (50257 x 768)
#   f32 8.1-10.0 / 10.2-13.0, q8 5.0 / 5.5, f16 7.0 / 5.3-7.1 (about
#   even), q4 4.2-4.5 / 6.6.  GPT-2 124M over 64 tokens 222 ms against
#   1062 (CLBlast and launches, as measured then).
match platform=Portable Computing Language device_type=CPU isa=haswell
match driver=any local_mem_kib=64- compute_units=any
shape m=64 n=768 k=768 trans_a=0 trans_b=1 count=4
shape m=64 n=3072 k=768 trans_a=0 trans_b=1 count=1
shape m=64 n=768 k=3072 trans_a=0 trans_b=1 count=1
shape m=64 n=2304 k=768 trans_a=0 trans_b=0 count=1
shape m=64 n=768 k=768 trans_a=0 trans_b=0 count=1
shape m=64 n=3072 k=768 trans_a=0 trans_b=0 count=1
shape m=64 n=768 k=3072 trans_a=0 trans_b=0 count=1
shape m=128 n=768 k=768 trans_a=0 trans_b=1 count=4
shape m=128 n=3072 k=768 trans_a=0 trans_b=1 count=1
shape m=128 n=768 k=3072 trans_a=0 trans_b=1 count=1
shape m=128 n=2304 k=768 trans_a=0 trans_b=0 count=1
shape m=128 n=768 k=768 trans_a=0 trans_b=0 count=1
shape m=128 n=3072 k=768 trans_a=0 trans_b=0 count=1
shape m=128 n=768 k=3072 trans_a=0 trans_b=0 count=1
shape m=197 n=768 k=768 trans_a=0 trans_b=1 count=4
shape m=197 n=3072 k=768 trans_a=0 trans_b=1 count=1
shape m=197 n=768 k=3072 trans_a=0 trans_b=1 count=1
shape m=197 n=2304 k=768 trans_a=0 trans_b=0 count=1
shape m=197 n=768 k=768 trans_a=0 trans_b=0 count=1
shape m=197 n=3072 k=768 trans_a=0 trans_b=0 count=1
shape m=197 n=768 k=3072 trans_a=0 trans_b=0 count=1
default_ms 2424.9363
tuned_ms 757.0506
Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=16 MDIMC=8 MWG=128 NDIMB=32 NDIMC=16 NWG=128 SA=0 SB=0 STRM=1 STRN=1 VWM=8 VWN=4
XgemmDirect KWID=8 MDIMAD=8 MDIMCD=8 NDIMBD=8 NDIMCD=8 PADA=1 PADB=1 VWMD=8 VWND=8 WGD=64
GemmRoutine XGEMM_MIN_INDIRECT_SIZE=335
Skinny q8=1x4
Rows f32=4096 f16=4096 q8=3535 q4=251 f32_in_out=96
Tiles on=1
