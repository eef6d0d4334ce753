// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// The devnet's stand-ins for what the PancakeSwap V3 npm build does not
// ship (its PoolDeployer and its periphery), so that tests can run its
// genuine factory and pools (devnet/contracts/prebuilt.txt). Test
// harnesses only: they trust every caller.

/// CodeHolder's code is the bytes it was built with: PancakeDeployer reads
/// a pool's creation code from it (too large to pass on every deploy).
contract CodeHolder {
    constructor(bytes memory code) {
        assembly {
            return(add(code, 32), mload(code))
        }
    }
}

/// PancakeDeployer plays PancakeSwap V3's PoolDeployer: the factory asks
/// it to deploy a pool, it CREATE2s the pool's shipped creation code with
/// PancakeSwap's salt and answers the pool's parameters() meanwhile.
contract PancakeDeployer {
    struct Parameters {
        address factory;
        address token0;
        address token1;
        uint24 fee;
        int24 tickSpacing;
    }

    Parameters public parameters;
    address public factoryAddress;
    address public immutable poolCode;

    constructor(address poolCode_) {
        poolCode = poolCode_;
    }

    function setFactoryAddress(address factory) external {
        require(factoryAddress == address(0), "factory already set");
        factoryAddress = factory;
    }

    function deploy(address factory, address token0, address token1, uint24 fee, int24 tickSpacing) external returns (address pool) {
        require(msg.sender == factoryAddress, "only the factory");
        parameters = Parameters(factory, token0, token1, fee, tickSpacing);
        bytes memory init = poolCode.code;
        bytes32 salt = keccak256(abi.encode(token0, token1, fee));
        assembly {
            pool := create2(0, add(init, 32), mload(init), salt)
        }
        require(pool != address(0), "pool creation failed");
        delete parameters;
    }
}

interface IERC20Pay {
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}

interface ICLPool {
    function token0() external view returns (address);
    function token1() external view returns (address);
    function swap(address recipient, bool zeroForOne, int256 amountSpecified, uint160 sqrtPriceLimitX96, bytes calldata data)
        external
        returns (int256, int256);
    function mint(address recipient, int24 tickLower, int24 tickUpper, uint128 amount, bytes calldata data)
        external
        returns (uint256, uint256);
}

/// CLRouter swaps and adds liquidity on a PancakeSwap V3 pool for its
/// caller, paying the pool from the caller's allowance in the callback, as
/// PancakeSwap's own router does; the caller receives what the pool pays.
contract CLRouter {
    function swap(address pool, bool zeroForOne, int256 amountSpecified, uint160 sqrtPriceLimitX96) external {
        ICLPool(pool).swap(msg.sender, zeroForOne, amountSpecified, sqrtPriceLimitX96, abi.encode(msg.sender));
    }

    function mint(address pool, int24 tickLower, int24 tickUpper, uint128 amount) external {
        ICLPool(pool).mint(msg.sender, tickLower, tickUpper, amount, abi.encode(msg.sender));
    }

    function pancakeV3SwapCallback(int256 amount0, int256 amount1, bytes calldata data) external {
        _pay(amount0 > 0 ? uint256(amount0) : 0, amount1 > 0 ? uint256(amount1) : 0, data);
    }

    function pancakeV3MintCallback(uint256 amount0, uint256 amount1, bytes calldata data) external {
        _pay(amount0, amount1, data);
    }

    function _pay(uint256 amount0, uint256 amount1, bytes calldata data) private {
        address payer = abi.decode(data, (address));
        if (amount0 > 0) require(IERC20Pay(ICLPool(msg.sender).token0()).transferFrom(payer, msg.sender, amount0), "pay token0");
        if (amount1 > 0) require(IERC20Pay(ICLPool(msg.sender).token1()).transferFrom(payer, msg.sender, amount1), "pay token1");
    }
}
