package org.jccl.arch;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.belongToAnyOf;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclId;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The layers of jccl-core (docs/ARCHITECTURE.md, "Layers and packages"), checked on the compiled main classes:
 * no package cycle, and no package using one of a layer above it. Bottom up:
 *
 * <pre>
 *   org.jccl (values, exceptions)      org.jccl.spi
 *   internal.config (settings: JDK and the API only)
 *   internal.log
 *   internal.net, reduce, tune, util, guard, topo
 *   internal.bootstrap, launch
 *   internal.transport.*
 *   internal.algo (against CollectiveContext, which the runtime implements)
 *   internal.control
 *   internal.runtime
 *   internal.doctor
 *   facades: Jccl, Config.fromEnvironment, JcclId.create (may call into any layer)
 * </pre>
 *
 * <p>The three facade classes live in the API package, so their calls into the internals are the
 * only edges from {@code org.jccl} upward; no other API class may have one.
 */
class LayeringTest {

    private static JavaClasses main;

    /** The API's entry points: Jccl, Config and JcclId (with their nested types). */
    private static final DescribedPredicate<JavaClass> FACADES = belongToAnyOf(Jccl.class, Config.class, JcclId.class)
            .as("the facades Jccl, Config, JcclId");

    private static final DescribedPredicate<JavaClass> INTERNAL = resideInAPackage("org.jccl.internal..").as("jccl's internals");

    @BeforeAll
    static void importMain() {
        main = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS).importPackages("org.jccl");
        // Rules over no classes would pass: make sure the import found jccl-core's classes.
        assertTrue(main.size() > 200, "imported only " + main.size() + " classes");
        assertTrue(main.contain(org.jccl.internal.runtime.CommunicatorImpl.class));
    }

    @Test
    void noPackageCycle() {
        slices().assignedFrom(new SliceAssignment() {
            @Override
            public SliceIdentifier getIdentifierOf(JavaClass c) {
                return c.getPackageName().startsWith("org.jccl") ? SliceIdentifier.of(c.getPackageName()) : SliceIdentifier.ignore();
            }

            @Override
            public String getDescription() {
                return "the packages of jccl-core";
            }
        }).should().beFreeOfCycles().ignoreDependency(FACADES, INTERNAL).check(main);
    }

    @Test
    void everyPackageUsesOnlyTheLayersBelowIt() {
        layeredArchitecture().consideringOnlyDependenciesInLayers()
                .layer("api").definedBy("org.jccl")
                .layer("spi").definedBy("org.jccl.spi")
                .layer("settings").definedBy("org.jccl.internal.config")
                .layer("log").definedBy("org.jccl.internal.log")
                .layer("foundations").definedBy("org.jccl.internal.net", "org.jccl.internal.reduce", "org.jccl.internal.tune",
                        "org.jccl.internal.util", "org.jccl.internal.guard", "org.jccl.internal.topo")
                .layer("bootstrap").definedBy("org.jccl.internal.bootstrap", "org.jccl.internal.launch")
                .layer("transports").definedBy("org.jccl.internal.transport..")
                .layer("algo").definedBy("org.jccl.internal.algo")
                .layer("control").definedBy("org.jccl.internal.control")
                .layer("runtime").definedBy("org.jccl.internal.runtime")
                .layer("doctor").definedBy("org.jccl.internal.doctor")
                .whereLayer("doctor").mayNotBeAccessedByAnyLayer()
                .whereLayer("runtime").mayOnlyBeAccessedByLayers("doctor")
                .whereLayer("control").mayOnlyBeAccessedByLayers("runtime", "doctor")
                .whereLayer("algo").mayOnlyBeAccessedByLayers("runtime", "doctor")
                .whereLayer("transports").mayOnlyBeAccessedByLayers("algo", "control", "runtime", "doctor")
                .whereLayer("bootstrap").mayOnlyBeAccessedByLayers("transports", "algo", "control", "runtime", "doctor")
                .whereLayer("foundations").mayOnlyBeAccessedByLayers("bootstrap", "transports", "algo", "control", "runtime", "doctor")
                .whereLayer("log").mayOnlyBeAccessedByLayers("foundations", "bootstrap", "transports", "algo", "control", "runtime",
                        "doctor")
                .whereLayer("settings").mayOnlyBeAccessedByLayers("log", "foundations", "bootstrap", "transports", "algo", "control",
                        "runtime", "doctor")
                .ignoreDependency(FACADES, INTERNAL)
                .check(main);
    }

    @Test
    void onlyTheFacadesOfTheApiReachIntoTheInternals() {
        classes().that().resideInAPackage("org.jccl").and(not(FACADES))
                .should().onlyDependOnClassesThat().resideOutsideOfPackage("org.jccl.internal..")
                .check(main);
    }

    @Test
    void theSpiIsBuiltOnTheApiAndTheJdkOnly() {
        classes().that().resideInAPackage("org.jccl.spi")
                .should().onlyDependOnClassesThat().resideInAnyPackage("java..", "org.jccl", "org.jccl.spi")
                .check(main);
    }

    /**
     * The runtime's two doors to the built-in transports: CommunicatorFactory lists them (LocalTransport, ShmTransport,
     * TcpTransport, beside those ServiceLoader finds), and Routing prices a transport that declares no costs as loopback TCP
     * (TcpTransport.COSTS). Both use only those three classes.
     */
    private static final DescribedPredicate<JavaClass> TRANSPORT_LIST = new DescribedPredicate<>("CommunicatorFactory and Routing") {
        @Override
        public boolean test(JavaClass c) {
            String n = c.getName();
            return n.equals("org.jccl.internal.runtime.CommunicatorFactory") || n.startsWith("org.jccl.internal.runtime.CommunicatorFactory$")
                    || n.equals("org.jccl.internal.runtime.Routing") || n.startsWith("org.jccl.internal.runtime.Routing$");
        }
    };

    /**
     * Issue 19, "the fast path goes around the SPI": algorithms and the runtime reach a transport only through
     * org.jccl.spi (Transport, Endpoint, Connection, CollectiveProvider, ...), so a transport found by ServiceLoader
     * gets everything a built-in one gets, its own collective path included. The one exception is the list of
     * built-in transports and the price of an undeclared one ({@link #TRANSPORT_LIST}), which name the three
     * Transport classes and nothing else of their packages.
     */
    @Test
    void algorithmsAndTheRuntimeReachTransportsOnlyThroughTheSpi() {
        noClasses().that().resideInAnyPackage("org.jccl.internal.algo", "org.jccl.internal.runtime", "org.jccl.internal.control")
                .and(not(TRANSPORT_LIST))
                .should().dependOnClassesThat().resideInAPackage("org.jccl.internal.transport..")
                .check(main);
        classes().that(TRANSPORT_LIST)
                .should().onlyDependOnClassesThat(not(resideInAPackage("org.jccl.internal.transport.."))
                        .or(belongToAnyOf(org.jccl.internal.transport.local.LocalTransport.class,
                                org.jccl.internal.transport.shm.ShmTransport.class, org.jccl.internal.transport.tcp.TcpTransport.class)))
                .check(main);
    }

    @Test
    void theSettingsAreBuiltOnTheApiAndTheJdkOnly() {
        classes().that().resideInAPackage("org.jccl.internal.config")
                .should().onlyDependOnClassesThat().resideInAnyPackage("java..", "org.jccl", "org.jccl.internal.config")
                .check(main);
    }
}
