package org.jccl.cuda.arch;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.jccl.cuda.CudaException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * jccl-cuda's two packages on the compiled main classes: {@code org.jccl.cuda.internal} (driver,
 * kernels, tuner, plans, exchanges) sits below the public {@code org.jccl.cuda}, naming of it only
 * the exception every CUDA call throws; and the module uses of jccl-core only the packages
 * org.jccl.core's module descriptor exports to it.
 */
class CudaLayeringTest {

    private static JavaClasses main;

    @BeforeAll
    static void importMain() {
        main = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS).importPackages("org.jccl.cuda");
        assertTrue(main.size() > 30, "imported only " + main.size() + " classes");
    }

    @Test
    void theInternalsNameOfThePublicPackageOnlyCudaException() {
        noClasses().that().resideInAPackage("org.jccl.cuda.internal..")
                .should().dependOnClassesThat(com.tngtech.archunit.base.DescribedPredicate.describe("public org.jccl.cuda types other than CudaException",
                        c -> c.getPackageName().equals("org.jccl.cuda") && !c.isEquivalentTo(CudaException.class)))
                .check(main);
    }

    @Test
    void jcclCoreIsUsedThroughItsApiAndTheInternalsItExportsToThisModule() {
        classes().that().resideInAPackage("org.jccl.cuda..")
                .should().onlyDependOnClassesThat().resideOutsideOfPackages("org.jccl.internal.algo..", "org.jccl.internal.bootstrap..",
                        "org.jccl.internal.control..", "org.jccl.internal.doctor..", "org.jccl.internal.launch..", "org.jccl.internal.net..",
                        "org.jccl.internal.reduce..", "org.jccl.internal.transport.local..", "org.jccl.internal.transport.tcp..",
                        "org.jccl.internal.tune..")
                .check(main);
    }
}
