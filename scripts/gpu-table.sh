#!/usr/bin/env bash
# The GPU perf table, jccl beside NCCL in one sitting, ON a lent GPU machine (no Java there: carry
# .device/ made by scripts/gpu-prep.sh). Writes $OUT/table-<coll>.txt and prints a ratio summary.
#
#   COLLS="all_reduce all_gather" TYPES="float bfloat16" scripts/gpu-table.sh
#
# Environment: NGPUS (default: all), COLLS, TYPES (default float), BACKENDS (default "jccl nccl"),
# AR_VARIANTS (extra JCCL_CUDA_ALLREDUCE values for all_reduce, e.g. "push"), VARIANTS (extra jccl
# runs with one setting forced, "coll:NAME=VALUE ...", e.g. "broadcast:JCCL_CUDA_BROADCAST=pull"), MINB (8), MAXB (1G,
# checked with -c 1), BIGB (8G: sizes above MAXB up to it run with -c 0 to fit the call's time; empty:
# none), FACTOR (4: the size step from MINB to MAXB).
# NCCL is the nvidia-nccl wheel's (the anchor's 2.28.9), not the system's older copy.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
OUT=${OUT:-/tmp/gpu-table-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ! command -v java >/dev/null || ! java -version 2>&1 | grep -q '"25'; then
    tar -xJf .device/jre25.tar.xz -C /tmp && export JAVA_HOME=/tmp/jre25 PATH=/tmp/jre25/bin:$PATH
fi
if [ -z "${JCCL_NCCL_LIBRARY:-}" ]; then
    d=$(python3 -c "import nvidia.nccl;print(list(nvidia.nccl.__path__)[0])" 2>/dev/null) && export JCCL_NCCL_LIBRARY=$d/lib/libnccl.so.2
fi
NGPUS=${NGPUS:-$(nvidia-smi -L | wc -l)}
COLLS=${COLLS:-"all_reduce all_gather reduce_scatter alltoall sendrecv broadcast"}
TYPES=${TYPES:-float}
BACKENDS=${BACKENDS:-"jccl nccl"}
AR_VARIANTS=${AR_VARIANTS:-}
VARIANTS=${VARIANTS:-}
MINB=${MINB:-8}; MAXB=${MAXB:-1G}; BIGB=${BIGB-8G}; FACTOR=${FACTOR:-4}
PERF="java --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -jar .device/cli/jccl-cli.jar perf"
summary=$OUT/summary.txt
for coll in $COLLS; do
    for t in $TYPES; do
        [ "$t" != float ] && [ "$coll" != all_reduce ] && continue
        runs=""
        for b in $BACKENDS; do runs="$runs $b:"; done
        [ "$coll" = all_reduce ] && for v in $AR_VARIANTS; do runs="$runs jccl:JCCL_CUDA_ALLREDUCE=$v"; done
        for v in $VARIANTS; do [ "${v%%:*}" = "$coll" ] && runs="$runs jccl:${v#*:}"; done
        for r in $runs; do
            b=${r%%:*}; v=${r#*:}
            f=$OUT/table-$coll.txt
            echo "### $coll $t backend=$b ${v} NGPUS=$NGPUS" | tee -a "$f"
            cmd="$PERF $coll -g $NGPUS -d $t -b $MINB -e $MAXB -f $FACTOR -w 5 -n 20 -c 1 --backend $b"
            echo "# ${v:+$v }$cmd" >>"$f"
            env ${v//;/ } timeout 150 $cmd >>"$f" 2>&1; echo "# exit $?" >>"$f"
            if [ -n "$BIGB" ]; then
                cmd="$PERF $coll -g $NGPUS -d $t -b 4G -e $BIGB -f 2 -w 2 -n 5 -c 0 --backend $b"
                echo "# ${v:+$v }$cmd" >>"$f"
                env ${v//;/ } timeout 120 $cmd 2>&1 | grep -E '^ +[0-9]' >>"$f"; echo "# exit $?" >>"$f"
            fi
        done
    done
done
# summary: out-of-place busbw per size, one column per run
for f in "$OUT"/table-*.txt; do
    [ -f "$f" ] || continue
    awk '/^###/{run=$0; n++; names[n]=run} /^ +[0-9]+ +[0-9]+/{if($1!=""){bw[n,$1]=$8; sizes[$1]=1}}
        END{for(i=1;i<=n;i++) print "# " i ": " names[i];
            printf "%12s", "bytes"; for(i=1;i<=n;i++) printf " %9s", "busbw" i; print "";
            for(s in sizes) {printf "%12d", s; for(i=1;i<=n;i++) printf " %9s", bw[i,s]; print ""}}' "$f" | sort -n -k1 >>"$summary"
done
cat "$summary"
