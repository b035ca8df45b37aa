#!/bin/bash
# Two builds of ferry side by side: every experiment of the quick suite (footprint aside) with the
# quick suite's own arguments, the builds interleaved (round 1: before, after; round 2: after,
# before), on one machine in one run. Then: python3 compare.py OUT.
#
#   tools/compare-builds/run.sh BEFORE_FERRY AFTER_FERRY OUT
set -u
before=$(realpath "$1"); after=$(realpath "$2"); out=$3
mkdir -p "$out"
steps=(
 "limits|limits --samples 5000 --memcpy-seconds 0.1"
 "latency|latency --samples 2000 --rounds 2 --sizes 32,1K,32K,1M"
 "send-time|send-time --samples 2000 --sizes 32,1K,32K,1M"
 "throughput|throughput --duration 1 --rounds 2"
 "idle|idle --seconds 1"
 "hubs|hubs --mode roundtrip,flood"
 "hubs-2hosts|hubs --mode roundtrip,flood --hosts 2 --transport udp --link-rate 100mbit"
 "udp-rate|udp-rate --duration 3 --rate 3G"
 "udp-rate-auto|udp-rate --threads auto --mss 1472 --rate 1G --rate-change 4G --duration 4"
 "cycle|cycle --cycle-ms 1 --max-multiplicity 2000000 --resolution 5"
)
for round in 1 2; do
  if [ $round = 1 ]; then order="before after"; else order="after before"; fi
  for s in "${steps[@]}"; do
    name=${s%%|*}; args=${s#*|}
    for b in $order; do
      echo "$(date +%T) round $round $name $b"
      if [ $b = before ]; then exe=$before; else exe=$after; fi
      CI=true "$exe" lab $args --json "$out/$name-$b-$round.json" > "$out/$name-$b-$round.log" 2>&1 \
        || echo "  failed: $(tail -1 "$out/$name-$b-$round.log")"
    done
  done
done
echo done
