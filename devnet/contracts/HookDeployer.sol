// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// The devnet's stand-in for the CREATE2 deployer a Uniswap V4 hook needs:
// the PoolManager calls a hook only at the points its address's low 14
// bits name (v4-core src/libraries/Hooks.sol), so a test mines a salt
// whose CREATE2 address carries the hook's flags and deploys the hook's
// shipped creation code with it (devnet/contracts/prebuilt.txt), as
// hook authors do on Base through a CREATE2 factory. A test harness
// only: it deploys for anyone.

/// HookDeployer CREATE2s creation code with a salt.
contract HookDeployer {
    function deploy(bytes32 salt, bytes calldata code) external returns (address deployed) {
        bytes memory init = code;
        assembly {
            deployed := create2(0, add(init, 32), mload(init), salt)
        }
        require(deployed != address(0), "creation failed");
    }
}
