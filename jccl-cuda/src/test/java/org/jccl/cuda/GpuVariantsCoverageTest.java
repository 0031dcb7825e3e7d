package org.jccl.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.jccl.cuda.internal.GpuTuner;
import org.jccl.cuda.testing.Coll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.Arguments;

/**
 * Without a GPU: GpuCollectivesTest's forced-variant sweep ({@code forcedVariants}) names every
 * variant the GPU tuner can choose, through the setting that forces it, for the collective it
 * belongs to. A variant added to {@link GpuTuner} without a forced run on the GPU machine fails here.
 */
class GpuVariantsCoverageTest {

    private record Forced(String setting, String value, Coll coll) {
    }

    private static List<Forced> forced() {
        List<Forced> out = new ArrayList<>();
        for (Arguments a : GpuCollectivesTest.allVariants().toList()) {
            Object[] v = a.get();
            out.add(new Forced((String) v[0], ((String) v[1]).split(";")[0], (Coll) v[2]));
        }
        return out;
    }

    private static void covered(List<Forced> forced, String setting, Coll coll, GpuTuner.Named[] variants) {
        Set<String> want = new TreeSet<>();
        for (GpuTuner.Named n : variants) {
            want.add(n.settingName());
        }
        Set<String> have = new TreeSet<>();
        for (Forced f : forced) {
            if (f.setting().equals(setting)) {
                assertEquals(coll, f.coll(), setting + "=" + f.value() + " is swept as the wrong collective");
                assertTrue(want.contains(f.value()), setting + "=" + f.value() + " is no variant of the tuner");
                have.add(f.value());
            }
        }
        assertEquals(want, have, "variants of " + setting + " that GpuCollectivesTest.forcedVariants does not force");
    }

    @Test
    void everyTunerVariantIsForcedOnceAtLeast() {
        List<Forced> f = forced();
        covered(f, "JCCL_CUDA_ALLREDUCE", Coll.ALL_REDUCE, GpuTuner.AllReduce.values());
        covered(f, "JCCL_CUDA_BROADCAST", Coll.BROADCAST, GpuTuner.Broadcast.values());
        covered(f, "JCCL_CUDA_REDUCE_SCATTER", Coll.REDUCE_SCATTER, GpuTuner.ReduceScatter.values());
        covered(f, "JCCL_CUDA_ALLTOALL", Coll.ALL_TO_ALL, GpuTuner.AllToAll.values());
        Set<String> settings = new TreeSet<>();
        f.forEach(x -> settings.add(x.setting()));
        assertEquals(Set.of("JCCL_CUDA_ALLREDUCE", "JCCL_CUDA_BROADCAST", "JCCL_CUDA_REDUCE_SCATTER", "JCCL_CUDA_ALLTOALL"), settings);
    }
}
