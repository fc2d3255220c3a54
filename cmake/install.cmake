# `cmake --install BUILD --prefix P`: headers under P/include/pipebal/, the libraries, the
# `pipebal` and `pipebal-torch` executables, a CMake package (find_package(pipebal CONFIG) with
# targets pipebal::balance, pipebal::reports, pipebal::schedule, pipebal::launch,
# pipebal::common — torch-free — and pipebal::pipeline, pipebal::distributed, pipebal::models,
# pipebal::profiler, pipebal::workflow, which bring LibTorch) and pkg-config files for the
# torch-free balancer.
include(CMakePackageConfigHelpers)

set(PIPEBAL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pipebal)

foreach(module common schedule reports balance pipeline launch distributed models profiler workflow
               git_commit)
  set_target_properties(pipebal_${module} PROPERTIES EXPORT_NAME ${module})
endforeach()

# The torch-free libraries stand alone: a user without LibTorch asks for COMPONENTS balance (or
# reports, schedule, launch, common).
install(TARGETS pipebal_common pipebal_schedule pipebal_reports pipebal_balance pipebal_launch
                pipebal_git_commit
        EXPORT pipebalBalanceTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS pipebal_pipeline pipebal_distributed pipebal_models pipebal_profiler
                pipebal_workflow
        EXPORT pipebalTorchTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# pipebal-torch keeps the path to a LibTorch outside the system's directories (a pip wheel's).
set_target_properties(pipebal_torch PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS pipebal pipebal_torch RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT pipebalBalanceTargets NAMESPACE pipebal:: DESTINATION ${PIPEBAL_CMAKE_DIR})
install(EXPORT pipebalTorchTargets NAMESPACE pipebal:: DESTINATION ${PIPEBAL_CMAKE_DIR})

# Every module's headers, but not the CUPTI backend's (cupti.h, which only the profiler's own
# build sees, under a macro private to it) nor the folders of reports/ that hold results.
foreach(module pipeline distributed balance profiler models reports workflow common)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${module}/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipebal/${module}
          FILES_MATCHING PATTERN "*.h"
          PATTERN "cupti_check.h" EXCLUDE
          PATTERN "cupti_timer.h" EXCLUDE
          PATTERN "examples" EXCLUDE
          PATTERN "validation-accuracy" EXCLUDE)
endforeach()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pipebalConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/pipebalConfig.cmake
                              INSTALL_DESTINATION ${PIPEBAL_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pipebalConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pipebalConfig.cmake
              ${PROJECT_BINARY_DIR}/pipebalConfigVersion.cmake
        DESTINATION ${PIPEBAL_CMAKE_DIR})

file(RELATIVE_PATH PIPEBAL_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(${PROJECT_SOURCE_DIR}/cmake/pipebal-balance.pc.in
               ${PROJECT_BINARY_DIR}/pipebal-balance.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pipebal-balance.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
