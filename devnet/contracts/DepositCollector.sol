// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// @notice The EIP-3009 function the collector calls: FiatToken v2.2's
/// bytes-signature overload of receiveWithAuthorization.
interface IERC3009Receive {
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external;
}

/// @title ERC-3009 deposit collector of the x402 `batch-settlement` escrow, for the Tollgate devnet
/// @notice Written for Tollgate from the public scheme specification; see
/// docs/batch-settlement.md §1.4. The payer signs a ReceiveWithAuthorization
/// (token's EIP-712 domain) to this collector, with the nonce
/// keccak256(abi.encode(channelId, salt)) binding it to one channel; the
/// escrow calls collect, which receives the tokens and forwards them.
/// @dev The escrow's address is a constant, not a constructor-set
/// immutable: the devnet places this runtime code in its genesis, where no
/// constructor runs, so it serves the canonical escrow only.
contract ERC3009DepositCollector {
    using SafeERC20 for IERC20;

    /// @notice The only caller collect accepts.
    address public constant x402BatchSettlement = 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003;

    error OnlyX402BatchSettlement();

    /// @notice Pulls `amount` of `token` from `payer` with the authorization
    /// in collectorData = abi.encode(uint256 validAfter, uint256 validBefore,
    /// uint256 salt, bytes signature) and sends it to the escrow.
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata collectorData)
        external
    {
        if (msg.sender != x402BatchSettlement) revert OnlyX402BatchSettlement();
        (uint256 validAfter, uint256 validBefore, uint256 salt, bytes memory signature) =
            abi.decode(collectorData, (uint256, uint256, uint256, bytes));
        bytes32 nonce = keccak256(abi.encode(channelId, salt));
        IERC3009Receive(token).receiveWithAuthorization(payer, address(this), amount, validAfter, validBefore, nonce, signature);
        IERC20(token).safeTransfer(msg.sender, amount);
    }
}
